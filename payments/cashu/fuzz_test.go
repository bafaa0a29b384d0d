package cashu

import (
	"encoding/json"
	"testing"
)

// The decoders of untrusted input: tokens (V3 and V4), payment requests
// and the CBOR under both. They must never panic, and what they accept
// must encode again and decode to the same.

func FuzzDecodeToken(f *testing.F) {
	var v nut00
	readVectors(f, "nut00.json", &v)
	for _, s := range append(v.V4Serialized, v.V3Serialized, v.V3Padding[0], "cashuB", "cashuBo2F0gA") {
		f.Add(s)
	}
	f.Fuzz(checkTokenRoundTrip)
}

// checkTokenRoundTrip decodes s and, if it is a token, checks that both
// encodings of it decode to the same proofs.
func checkTokenRoundTrip(t *testing.T, s string) {
	tok, err := DecodeToken(s)
	if err != nil {
		return
	}
	for _, enc := range []func() (string, error){tok.EncodeV3, tok.EncodeV4} {
		out, err := enc()
		if err != nil {
			continue // e.g. a keyset id that is not hex cannot be V4
		}
		again, err := DecodeToken(out)
		if err != nil {
			t.Fatalf("re-encoded token does not decode: %v", err)
		}
		if a, b := mustJSON(t, again.Proofs), mustJSON(t, tok.Proofs); a != b {
			t.Fatalf("round trip changed the proofs:\n%s\n%s", a, b)
		}
	}
}

func FuzzDecodePaymentRequest(f *testing.F) {
	var vs []nut18Vector
	readVectors(f, "nut18.json", &vs)
	for _, v := range vs {
		f.Add(v.Encoded)
	}
	f.Fuzz(checkRequestRoundTrip)
}

// checkRequestRoundTrip decodes s and, if it is a payment request, checks
// that its encoding decodes to the same request.
func checkRequestRoundTrip(t *testing.T, s string) {
	r, err := DecodePaymentRequest(s)
	if err != nil {
		return
	}
	out, err := r.Encode()
	if err != nil {
		return // an amount without a unit decodes but does not encode
	}
	again, err := DecodePaymentRequest(out)
	if err != nil {
		t.Fatalf("re-encoded request does not decode: %v", err)
	}
	if a, b := mustJSON(t, again), mustJSON(t, r); a != b {
		t.Fatalf("round trip changed the request:\n%s\n%s", a, b)
	}
}

func FuzzDecodeCBOR(f *testing.F) {
	f.Add([]byte{0xa1, 0x61, 't', 0x80})
	f.Add([]byte{0x9a, 0xff, 0xff, 0xff, 0xff})
	var v nut00
	readVectors(f, "nut00.json", &v)
	f.Add(mustHex(f, v.V4RawHex)[len("crawB"):])
	// The fuzzer mutates CBOR bytes far better than base64 text: feed the
	// bytes to both formats through their base64.
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeCBOR(b)
		checkTokenRoundTrip(t, prefixV4+b64url(b))
		checkRequestRoundTrip(t, prefixCreqA+stdB64(b))
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
