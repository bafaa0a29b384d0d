package did

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	good := []string{"did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw", "did:web:example.com%3A8443:a:b", "did:nostr:" + "ab"}
	for _, s := range good {
		d, err := Parse(s)
		if err != nil || d.String() != s {
			t.Errorf("Parse(%q) = %v, %v", s, d, err)
		}
	}
	bad := []string{"", "did:", "did:key", "did:KEY:x", "did:key:", "did:key:a b", "did:web:x%zz", "key:z6Mk", "did:web:a:", "did:key:x#frag"}
	for _, s := range bad {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) err = %v, want ErrInvalid", s, err)
		}
	}
}

func TestResolveKey_KitVectors(t *testing.T) {
	cases := []struct {
		did, pubHex string
		typ         KeyType
	}{
		{"did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", Ed25519},
		{"did:key:zQ3sheBXCeZNNKcYTSbn3U6mTZD228vEFA753n76azCDQq16g", "02f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9", Secp256k1},
	}
	for _, c := range cases {
		doc, err := ResolveKey(c.did)
		if err != nil {
			t.Fatal(err)
		}
		vm, ok := doc.Method(c.did + "#account-key")
		if !ok || !doc.Authenticates(c.did+"#account-key") {
			t.Fatalf("%s: no authentication key #account-key", c.did)
		}
		k, err := vm.PublicKey()
		if err != nil || k.Type != c.typ || hex.EncodeToString(k.Bytes) != c.pubHex {
			t.Errorf("%s: key %v %x, %v", c.did, k.Type, k.Bytes, err)
		}
		if got := KeyDID(k); got != c.did {
			t.Errorf("KeyDID = %s, want %s", got, c.did)
		}
	}
}

func TestSigners_SignAndVerifyThroughTheirDocuments(t *testing.T) {
	ctx := context.Background()
	r := NewResolver(ResolverOptions{})
	for _, typ := range []KeyType{Ed25519, Secp256k1, P256, Schnorr} {
		var s *KeySigner
		var err error
		if typ == Schnorr {
			var sk [32]byte
			sk[31] = 7
			s = NostrSigner(sk)
		} else if s, err = GenerateKey(typ); err != nil {
			t.Fatal(err)
		}
		doc, err := r.Resolve(ctx, s.DID())
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		vm, ok := doc.Method(s.KeyID())
		if !ok || !doc.Authenticates(s.KeyID()) {
			t.Fatalf("%s: key %s not in document", typ, s.KeyID())
		}
		pub, err := vm.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		msg := []byte("MCP_NIP10_AUTH_V1:{}")
		sig, err := s.Sign(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Verify(msg, sig); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		sig[5] ^= 1
		if err := pub.Verify(msg, sig); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: tampered signature: %v", typ, err)
		}
	}
}

func TestGenerateKeyFile(t *testing.T) {
	path := t.TempDir() + "/id.json"
	s, err := GenerateKeyFile(path, P256)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadKeyFile(path)
	if err != nil || got.DID() != s.DID() {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := GenerateKeyFile(path, Ed25519); err == nil {
		t.Fatal("replaced an existing key file")
	}
}
