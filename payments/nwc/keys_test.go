package nwc

import (
	"testing"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip04"
	"fiatjaf.com/nostr/nip44"
)

// What one side's keys encrypt and sign, the other side reads with the
// nostr library's own derivation: the cached secrets are the right ones.
func TestKeys_ReadableByTheOtherSide(t *testing.T) {
	a, b := nostr.Generate(), nostr.Generate()
	k := newKeys(a, b.Public())
	for range 2 { // the second time from the cache
		c44, err := k.encrypt(EncryptionNIP44, "hello")
		if err != nil {
			t.Fatal(err)
		}
		ck, _ := nip44.GenerateConversationKey(a.Public(), b)
		if plain, err := nip44.Decrypt(c44, ck); err != nil || plain != "hello" {
			t.Fatalf("nip44: %q, %v", plain, err)
		}
		c04, err := k.encrypt(EncryptionNIP04, "hello")
		if err != nil {
			t.Fatal(err)
		}
		ss, _ := nip04.ComputeSharedSecret(a.Public(), b)
		if plain, err := nip04.Decrypt(c04, ss); err != nil || plain != "hello" {
			t.Fatalf("nip04: %q, %v", plain, err)
		}
		evt := nostr.Event{Kind: KindRequest, CreatedAt: nostr.Now(), Content: c44}
		if err := k.sign(&evt); err != nil || evt.PubKey != a.Public() || !evt.VerifySignature() {
			t.Fatalf("signed by %s (want %s), verifies %v, err %v", evt.PubKey.Hex(), a.Public().Hex(), evt.VerifySignature(), err)
		}
	}
	if _, err := k.encrypt("nip99", "x"); err == nil {
		t.Fatal("an unknown scheme encrypted")
	}
}

// BenchmarkKeys compares a message encrypted and signed with a
// connection's keys, derived once, against one that derives them anew.
func BenchmarkKeys(b *testing.B) {
	a, peer := nostr.Generate(), nostr.Generate().Public()
	body := `{"method":"pay_invoice","params":{"invoice":"lnbc10n1p5example"}}`
	b.Run("cached", func(b *testing.B) {
		k := newKeys(a, peer)
		for b.Loop() {
			c, _ := k.encrypt(EncryptionNIP44, body)
			evt := nostr.Event{Kind: KindRequest, Content: c}
			k.sign(&evt)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			c, _ := newKeys(a, peer).encrypt(EncryptionNIP44, body)
			evt := nostr.Event{Kind: KindRequest, Content: c}
			evt.Sign(a)
		}
	})
}
