package did

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParse: the DID parser never panics, what it accepts prints back as
// given, and resolving it locally (did:key, did:nostr; did:web only as far
// as its URL) gives a document for that very DID or a classified error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw",
		"did:key:zQ3sheBXCeZNNKcYTSbn3U6mTZD228vEFA753n76azCDQq16g",
		"did:nostr:79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798",
		"did:web:example.com%3A8443:user:alice",
		"did:web:127.0.0.1%3A1",
		"did:example:123#frag",
		"did:key:z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, d)
		}
		var doc *Document
		switch d.Method {
		case "key":
			doc, err = ResolveKey(s)
		case "nostr":
			doc, err = ResolveNostr(s)
		case "web":
			_, _ = WebURL(s)
			return
		default:
			return
		}
		if err != nil {
			return
		}
		if doc.ID != s || len(doc.VerificationMethod) == 0 {
			t.Fatalf("document of %s: %+v", s, doc)
		}
		for _, vm := range doc.VerificationMethod {
			if _, err := vm.PublicKey(); err != nil || !doc.Authenticates(vm.ID) {
				t.Fatalf("%s: method %s: %v", s, vm.ID, err)
			}
		}
	})
}

// FuzzDocument: any JSON a did:web server could send decodes or fails
// cleanly; every key it lists decodes or fails cleanly; a decoded document
// re-encodes to JSON that decodes again.
func FuzzDocument(f *testing.F) {
	b, _ := json.Marshal(ServerDocument("", NostrSigner([32]byte{31: 1}), "https://x/mcp"))
	f.Add(b)
	f.Add([]byte(`{"id":"did:web:x","verificationMethod":[{"id":"#k","type":"JsonWebKey2020","publicKeyJwk":{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}}],"authentication":[{"id":"#e"}],"service":[{"type":["MCPServiceNIP7"],"serviceEndpoint":{}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var doc Document
		if json.Unmarshal(in, &doc) != nil {
			return
		}
		for _, vm := range doc.VerificationMethod {
			if k, err := vm.PublicKey(); err == nil {
				_ = k.Verify([]byte("m"), make([]byte, 64))
			}
		}
		_ = doc.MCPEndpoints()
		out, err := json.Marshal(&doc)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again Document
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-decode %s: %v", out, err)
		}
	})
}

// FuzzMultibase: decoding never panics; base58 round-trips.
func FuzzMultibase(f *testing.F) {
	f.Add("zFVen3X669xLzsi6N2V91DoiyzHzg1uAgqiT8jZ9nS96Z")
	f.Add("uAQID-g")
	f.Add("z111")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := DecodeMultibase(s)
		if err != nil || s[0] != 'z' {
			return
		}
		if again, err := DecodeBase58(EncodeBase58(b)); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("base58 round trip of %x: %x, %v", b, again, err)
		}
	})
}
