package contextvm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// referenceVectors are events and gift wraps made by @contextvm/sdk 0.11.14
// and nostr-tools (interop/js/contextvm-vectors.mjs; regenerate with
// go test ./interop -run TestContextVMVectors -update).
type referenceVectors struct {
	Sender    string `json:"sender"`
	Recipient string `json:"recipient"`
	Events    []struct {
		Message json.RawMessage `json:"message"`
		Event   nostr.Event     `json:"event"`
	} `json:"events"`
	Wraps []struct {
		Message json.RawMessage `json:"message"`
		Wrap    nostr.Event     `json:"wrap"`
	} `json:"wraps"`
}

const vectorRecipientSK = "3333333333333333333333333333333333333333333333333333333333333333"

func loadVectors(t testing.TB) referenceVectors {
	t.Helper()
	data, err := os.ReadFile("testdata/reference-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v referenceVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func canonical(t testing.TB, b []byte) string {
	t.Helper()
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(x)
	return string(out)
}

func TestDecodeContent_ReferenceEvents(t *testing.T) {
	v := loadVectors(t)
	if len(v.Events) == 0 {
		t.Fatal("no vectors")
	}
	for i, e := range v.Events {
		msgs, batch, err := DecodeContent(e.Event.Content)
		if err != nil || batch || len(msgs) != 1 {
			t.Fatalf("event %d: %v", i, err)
		}
		enc, _ := EncodeContent(msgs[0])
		if canonical(t, []byte(enc)) != canonical(t, e.Message) {
			t.Errorf("event %d: round trip %s, want %s", i, enc, e.Message)
		}
	}
}

func TestUnwrap_ReferenceWraps(t *testing.T) {
	v := loadVectors(t)
	sk := nostr.MustSecretKeyFromHex(vectorRecipientSK)
	signer := NewKeySigner(sk)
	kinds := map[nostr.Kind]int{}
	for i, w := range v.Wraps {
		inner, err := Unwrap(context.Background(), signer, sk.Public(), w.Wrap)
		if err != nil {
			t.Fatalf("wrap %d: %v", i, err)
		}
		if inner.PubKey.Hex() != v.Sender {
			t.Errorf("wrap %d: inner author %s, want %s", i, inner.PubKey.Hex(), v.Sender)
		}
		kinds[w.Wrap.Kind]++
		// The outer layer is one p tag and a fresh key, as CEP-4 says.
		if len(w.Wrap.Tags) != 1 || w.Wrap.Tags[0][0] != "p" || w.Wrap.PubKey == inner.PubKey {
			t.Errorf("wrap %d: unexpected outer shape %v", i, w.Wrap.Tags)
		}
	}
	if kinds[KindGiftWrap] == 0 || kinds[KindEphemeralGiftWrap] == 0 {
		t.Errorf("vectors cover kinds %v; want both wrap kinds", kinds)
	}
	// Addressed to someone else: refused before any decryption.
	other := NewKeySigner(nostr.Generate())
	if _, err := Unwrap(context.Background(), other, nostr.Generate().Public(), v.Wraps[0].Wrap); !errors.Is(err, ErrNotAddressed) {
		t.Errorf("foreign wrap: %v, want ErrNotAddressed", err)
	}
}

func TestWrapUnwrap_RoundTrip(t *testing.T) {
	sender, recipient := nostr.Generate(), nostr.Generate()
	inner := nostr.Event{Kind: KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", recipient.Public().Hex()}}, Content: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}
	inner.Sign(sender)
	for _, kind := range []nostr.Kind{KindGiftWrap, KindEphemeralGiftWrap} {
		w, err := Wrap(inner, recipient.Public(), kind)
		if err != nil {
			t.Fatal(err)
		}
		if w.Kind != kind || w.PubKey == sender.Public() || !w.VerifySignature() {
			t.Fatalf("wrap shape: kind %d", w.Kind)
		}
		if d := int64(w.CreatedAt) - int64(nostr.Now()); d < -2 || d > 2 {
			t.Errorf("wrap created_at is %ds from now; ContextVM wraps are not backdated", d)
		}
		got, err := Unwrap(context.Background(), NewKeySigner(recipient), recipient.Public(), w)
		if err != nil || got.ID != inner.ID {
			t.Fatalf("unwrap: %v", err)
		}
	}
}

func TestUnwrap_RejectsBadInner(t *testing.T) {
	sender, recipient := nostr.Generate(), nostr.Generate()
	me := recipient.Public()
	signer := NewKeySigner(recipient)
	good := func() nostr.Event {
		e := nostr.Event{Kind: KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", me.Hex()}}, Content: "{}"}
		e.Sign(sender)
		return e
	}
	wrapRaw := func(plaintext string) nostr.Event {
		// Build a wrap around arbitrary plaintext, as an attacker would.
		e := good()
		w, _ := Wrap(e, me, KindGiftWrap)
		eph := nostr.Generate()
		ck, _ := nip44Key(eph, me)
		w.Content, _ = nip44Encrypt(plaintext, ck)
		w.Sign(eph)
		return w
	}
	forged := good()
	forged.Content = "changed after signing"
	wrongKind := good()
	wrongKind.Kind = 1
	wrongKind.Sign(sender)
	otherP := good()
	otherP.Tags = nostr.Tags{{"p", nostr.Generate().Public().Hex()}}
	otherP.Sign(sender)

	cases := []struct {
		name string
		wrap nostr.Event
		want error
	}{
		{"forged inner signature", wrapRaw(forged.String()), ErrInvalidInner},
		{"inner not JSON", wrapRaw("not json"), ErrInvalidInner},
		{"inner of another kind", wrapRaw(wrongKind.String()), ErrWrongInnerKind},
		{"inner addressed to another", wrapRaw(otherP.String()), ErrNotAddressed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Unwrap(context.Background(), signer, me, tc.wrap); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	garbled := wrapRaw("{}")
	garbled.Content = "AAAA" + garbled.Content[4:]
	if _, err := Unwrap(context.Background(), signer, me, garbled); !errors.Is(err, ErrUndecryptable) {
		t.Errorf("garbled ciphertext: %v", err)
	}
}

func TestWrap_TooLarge(t *testing.T) {
	sk := nostr.Generate()
	e := nostr.Event{Kind: KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{}, Content: strings.Repeat("x", MaxPlaintext)}
	e.Sign(sk)
	if _, err := Wrap(e, sk.Public(), KindGiftWrap); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestDecodeContent_Errors(t *testing.T) {
	for _, c := range []string{"", "   ", "not json", `{"id":1,"method":"x"}`, `[]`, `[1,2]`, `{"jsonrpc":"2.0"}`, "[" + strings.Repeat(`{"jsonrpc":"2.0","method":"n"},`, maxBatch) + `{"jsonrpc":"2.0","method":"n"}]`} {
		if _, _, err := DecodeContent(c); !errors.Is(err, ErrNotMessage) {
			t.Errorf("DecodeContent(%.40q) = %v, want ErrNotMessage", c, err)
		}
	}
	msgs, batch, err := DecodeContent(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	if err != nil || !batch || len(msgs) != 2 {
		t.Fatalf("batch: %v %v %d", err, batch, len(msgs))
	}
	if _, ok := msgs[0].(*jsonrpc.Request); !ok {
		t.Errorf("batch member 0 is %T", msgs[0])
	}
}

func TestLearnCaps_ReplacesNotMerges(t *testing.T) {
	caps, ok := learnCaps(nostr.Tags{{"p", "x"}, {"e", "y"}})
	if ok || caps.known {
		t.Fatal("p and e are not discovery tags")
	}
	caps, ok = learnCaps(nostr.Tags{{TagName, "srv"}, {TagSupportEncryption}, {TagSupportEncryptionEphemeral}})
	if !ok || !caps.encryption || !caps.ephemeral || caps.info.Name != "srv" {
		t.Fatalf("caps = %+v", caps)
	}
	// A later message without the ephemeral flag withdraws it.
	caps, _ = learnCaps(nostr.Tags{{TagSupportEncryption}})
	if caps.ephemeral {
		t.Fatal("support_encryption_ephemeral survived a message without it")
	}
	// Flags with a value are not flags (the reference accepts only 1-element tags).
	if caps, _ := learnCaps(nostr.Tags{{TagSupportEncryption, "false"}}); caps.encryption {
		t.Fatal("a valued support_encryption tag counted as the flag")
	}
}

// The server's pmi tags are kept as sent, in order (its preference), once
// each; an empty one names no method.
func TestLearnCaps_PMIs(t *testing.T) {
	caps, ok := learnCaps(nostr.Tags{{TagPMI, "bitcoin-lightning-bolt11"}, {TagPMI, "fake"}, {TagPMI}, {TagPMI, "bitcoin-lightning-bolt11"}})
	if !ok || !slices.Equal(caps.pmis, []string{"bitcoin-lightning-bolt11", "fake"}) {
		t.Fatalf("pmis = %q (known %v)", caps.pmis, ok)
	}
}

func FuzzDecodeContent(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`,
		`[{"jsonrpc":"2.0","method":"n"}]`, `[]`, `null`, `{}`, `"`, `[`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		msgs, _, err := DecodeContent(content)
		if err != nil {
			var ce *ContentError
			if !errors.As(err, &ce) || !errors.Is(err, ErrNotMessage) {
				t.Fatalf("error is not a ContentError wrapping ErrNotMessage: %v", err)
			}
			if ce.Code != jsonrpc.CodeParseError && ce.Code != jsonrpc.CodeInvalidRequest {
				t.Fatalf("code %d", ce.Code)
			}
			// The answer always encodes, as an error with an id or null.
			answer, err := encodeErrorAnswer(ce.answer())
			if err != nil {
				t.Fatalf("encode the answer: %v", err)
			}
			var probe map[string]json.RawMessage
			if json.Unmarshal([]byte(answer), &probe) != nil || probe["id"] == nil || probe["error"] == nil {
				t.Fatalf("answer %s", answer)
			}
			return
		}
		if len(msgs) == 0 || len(msgs) > maxBatch {
			t.Fatalf("%d messages", len(msgs))
		}
		for _, m := range msgs {
			enc, err := EncodeContent(m)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			again, _, err := DecodeContent(enc)
			if err != nil || len(again) != 1 {
				t.Fatalf("re-decode %s: %v", enc, err)
			}
		}
	})
}

func FuzzUnwrap(f *testing.F) {
	recipient := nostr.MustSecretKeyFromHex(vectorRecipientSK)
	me := recipient.Public()
	signer := NewKeySigner(recipient)
	data, _ := os.ReadFile("testdata/reference-vectors.json")
	var v referenceVectors
	json.Unmarshal(data, &v)
	for _, w := range v.Wraps {
		f.Add(w.Wrap.Content, int(w.Wrap.Kind))
	}
	f.Add("", 1059)
	f.Add("AQ==", 21059)
	eph := nostr.Generate()
	f.Fuzz(func(t *testing.T, content string, kind int) {
		w := nostr.Event{Kind: nostr.Kind(kind), CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", me.Hex()}}, Content: content}
		w.Sign(eph)
		inner, err := Unwrap(context.Background(), signer, me, w)
		if err != nil {
			return
		}
		// Whatever unwraps must be a valid message event addressed to us.
		if inner.Kind != KindMessage || !inner.CheckID() || !inner.VerifySignature() || !hasPTag(inner.Tags, me) {
			t.Fatalf("Unwrap accepted an invalid inner event: %v", inner)
		}
	})
}

func TestKeySignerSignsVerifiableEvents(t *testing.T) {
	sk := nostr.Generate()
	k := NewKeySigner(sk)
	evt := nostr.Event{Kind: KindMessage, CreatedAt: nostr.Now(), Content: "x"}
	if err := k.SignEvent(context.Background(), &evt); err != nil {
		t.Fatal(err)
	}
	if evt.PubKey != sk.Public() || !evt.CheckID() || !evt.VerifySignature() {
		t.Fatal("KeySigner produced an event that does not verify")
	}
}

func BenchmarkSign(b *testing.B) {
	sk := nostr.Generate()
	k := NewKeySigner(sk)
	evt := nostr.Event{Kind: KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", sk.Public().Hex()}}, Content: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}
	b.Run("nostr.Event.Sign", func(b *testing.B) {
		for b.Loop() {
			evt.Sign(sk)
		}
	})
	b.Run("KeySigner", func(b *testing.B) {
		for b.Loop() {
			k.SignEvent(context.Background(), &evt)
		}
	})
}
