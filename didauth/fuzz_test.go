package didauth

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// FuzzParseHeader: the header decoder never panics, every refusal is an
// *Error with a 401 code, and what it accepts re-encodes to credentials
// that decode to the same thing.
func FuzzParseHeader(f *testing.F) {
	v := loadKitVectorsF(f)
	f.Add(v.Ed25519.Header)
	f.Add(v.Secp256k1.Header)
	f.Add("DIDAuthV1 u")
	f.Add("DIDAuthV1 ueyJ9")
	f.Add("Bearer x")
	f.Add("didauthv1 u" + "e30")
	f.Fuzz(func(t *testing.T, h string) {
		c, err := ParseHeader(h)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Status != 401 || e.Code == "" {
				t.Fatalf("error %v is not a 401 *Error", err)
			}
			return
		}
		c2, err := ParseHeader(c.Header())
		if err != nil || c2.Signature != c.Signature {
			t.Fatalf("re-encoded header: %v, %+v vs %+v", err, c2, c)
		}
		var a, b any
		if json.Unmarshal(c.SignedData, &a) != nil || json.Unmarshal(c2.SignedData, &b) != nil {
			t.Fatal("signed_data no longer JSON")
		}
	})
}

// FuzzVerify: whatever the header, Verify answers with an *Error or a DID,
// never panics, and never accepts a header that was not signed.
func FuzzVerify(f *testing.F) {
	v := loadKitVectorsF(f)
	f.Add(v.Ed25519.Header, true)
	f.Add(v.Fresh.Header, false)
	f.Add("DIDAuthV1 ueyJzaWduZWRfZGF0YSI6e30sInNpZ25hdHVyZSI6eyJzaWduZXJfZGlkIjoiZGlkOmtleTp6IiwKImtleV9pZCI6ImRpZDprZXk6eiNhIiwidmFsdWUiOiJ1QUEifX0", true)
	at := time.Unix(v.Ed25519.Timestamp, 0)
	f.Fuzz(func(t *testing.T, h string, compat bool) {
		ver, err := NewVerifier(Options{Compat: compat, Now: func() time.Time { return at }, Window: 1 << 62, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		d, err := ver.Verify(context.Background(), h, Request{Method: "POST", Path: "/mcp", URL: "https://mcp.example.com"})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("not an *Error: %v", err)
			}
			return
		}
		// Only the vectors' own signed headers (or their harmless
		// re-encodings in compat mode) can verify.
		if d != v.Ed25519.DID && d != v.Secp256k1.DID {
			t.Fatalf("accepted a header as %s", d)
		}
	})
}

// FuzzCanonical: both canonicalizations of any JSON object are
// deterministic and idempotent; JCS output is what jcs gives for its own
// output; the kit's form of an object whose nested keys are all top-level
// keys is valid JSON holding the same values.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"nonce":"n","timestamp":1735689600,"operation":"mcp_tool_call","params":{"tool":"echo"}}`))
	f.Add([]byte(`{"b":{"x":1,"a":2,"b":3},"a":[{"a":1,"z":2}]}`))
	f.Add([]byte(`{"\u00e9":1,"z":"<&>\u2028","\ud83d\ude00":[1e21,0.1,-0,1E-7]}`))
	f.Add([]byte(`{"a":"\u0000\u001f\"\\"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if c, err := Canonical(in); err == nil {
			c2, err := Canonical(c)
			if err != nil || !bytes.Equal(c, c2) {
				t.Fatalf("JCS not idempotent: %s then %s (%v)", c, c2, err)
			}
			if j, _ := jcs.Transform(in); !bytes.Equal(j, c) {
				t.Fatalf("Canonical differs from jcs.Transform")
			}
		}
		k, err := KitCanonical(in)
		if err != nil {
			return
		}
		if !json.Valid(k) {
			t.Fatalf("kit canonical form is not JSON: %s", k)
		}
		k2, err := KitCanonical(k)
		if err != nil || !bytes.Equal(k, k2) {
			t.Fatalf("kit form not idempotent: %s then %s (%v)", k, k2, err)
		}
	})
}

func loadKitVectorsF(f *testing.F) kitVectors {
	var v kitVectors
	b, err := readVectors()
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		f.Fatal(err)
	}
	return v
}
