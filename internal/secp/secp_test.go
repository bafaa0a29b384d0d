package secp

import (
	"errors"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip44"
)

// The group order n: the smallest secret key that is out of range.
var groupOrder = nostr.SecretKey{
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
	0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
}

// offCurve is an x coordinate with no point on secp256k1 (x³+7 is not a
// square for x = 5).
var offCurve = nostr.PubKey{31: 5}

func TestOffCurveIsOffTheCurve(t *testing.T) {
	if _, err := btcec.ParsePubKey(append([]byte{2}, offCurve[:]...)); err == nil {
		t.Fatal("x = 5 is on the curve; pick another off-curve x")
	}
}

// Signatures from either backend verify with the pure-Go verifier and with
// nostr.Event.VerifySignature (whichever backend that is built with).
func TestSignVerifies(t *testing.T) {
	for range 20 {
		sk := nostr.Generate()
		k, err := NewKey(sk)
		if err != nil {
			t.Fatal(err)
		}
		evt := nostr.Event{Kind: 1, Content: "hello", CreatedAt: nostr.Now(), Tags: nostr.Tags{}, PubKey: sk.Public()}
		evt.ID = evt.GetID()
		evt.Sig, err = k.Sign((*[32]byte)(&evt.ID))
		if err != nil {
			t.Fatal(err)
		}
		if !evt.VerifySignature() {
			t.Fatalf("%s: nostr.Event.VerifySignature rejects the signature", Backend)
		}
		pub, err := schnorr.ParsePubKey(evt.PubKey[:])
		if err != nil {
			t.Fatal(err)
		}
		sig, err := schnorr.ParseSignature(evt.Sig[:])
		if err != nil {
			t.Fatal(err)
		}
		if !sig.Verify(evt.ID[:], pub) {
			t.Fatalf("%s: btcec rejects the signature", Backend)
		}
	}
}

// ConversationKey equals the pure-Go NIP-44 path's, in both directions.
func TestConversationKeyMatchesGo(t *testing.T) {
	for range 50 {
		a, b := nostr.Generate(), nostr.Generate()
		want, err := nip44.GenerateConversationKey(b.Public(), a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ConversationKey(b.Public(), a)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: conversation key %x, the Go path gives %x", Backend, got, want)
		}
		back, err := ConversationKey(a.Public(), b)
		if err != nil || back != want {
			t.Fatalf("%s: not symmetric: %x, %v", Backend, back, err)
		}
	}
}

// A NIP-44 test vector (nip44.vectors.json, get_conversation_key).
func TestConversationKeyVector(t *testing.T) {
	sk, _ := nostr.SecretKeyFromHex("315e59ff51cb9209768cf7da80791ddcaae56ac9775eb25b6dee1234bc5d2268")
	pub, _ := nostr.PubKeyFromHex("c2f9d9948dc8c7c38321e4b85c8558872eafa0641cd269db76848a6073e69133")
	want := "3dfef0ce2a4d80a25e7a328accf73448ef67096f65f79588e358d9a0eb9013f1"
	got, err := ConversationKey(pub, sk)
	if err != nil {
		t.Fatal(err)
	}
	if nostr.HexEncodeToString(got[:]) != want {
		t.Fatalf("%s: got %x, want %s", Backend, got, want)
	}
}

func TestInvalidKeys(t *testing.T) {
	for name, sk := range map[string]nostr.SecretKey{"zero": {}, "order": groupOrder} {
		if _, err := NewKey(sk); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("NewKey(%s) = %v, want ErrInvalidKey", name, err)
		}
		if _, err := ConversationKey(nostr.Generate().Public(), sk); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ConversationKey(_, %s) = %v, want ErrInvalidKey", name, err)
		}
	}
	if _, err := ConversationKey(offCurve, nostr.Generate()); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("ConversationKey(off-curve point) = %v, want ErrInvalidKey", err)
	}
}

// FuzzConversationKey: any 32 bytes as the peer's key give the Go path's
// answer, or an error where the Go path errs.
func FuzzConversationKey(f *testing.F) {
	f.Add(offCurve[:])
	f.Add(make([]byte, 32))
	pk := nostr.Generate().Public()
	f.Add(pk[:])
	sk := nostr.Generate()
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 32 {
			return
		}
		pub := nostr.PubKey(b)
		want, werr := nip44.GenerateConversationKey(pub, sk)
		got, err := ConversationKey(pub, sk)
		if (werr == nil) != (err == nil) || got != want {
			t.Fatalf("%s: got %x, %v; the Go path gives %x, %v", Backend, got, err, want, werr)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	k, _ := NewKey(nostr.Generate())
	id := [32]byte{1}
	for b.Loop() {
		k.Sign(&id)
	}
}

func BenchmarkVerify(b *testing.B) {
	evt := nostr.Event{Kind: 1, Content: "hello", CreatedAt: nostr.Now()}
	evt.Sign(nostr.Generate())
	for b.Loop() {
		evt.VerifySignature()
	}
}

// BenchmarkConversationKey: this backend against the pure-Go NIP-44 path in
// the same binary.
func BenchmarkConversationKey(b *testing.B) {
	sk, pub := nostr.Generate(), nostr.Generate().Public()
	b.Run(Backend, func(b *testing.B) {
		for b.Loop() {
			ConversationKey(pub, sk)
		}
	})
	b.Run("go-nip44", func(b *testing.B) {
		for b.Loop() {
			nip44.GenerateConversationKey(pub, sk)
		}
	})
}
