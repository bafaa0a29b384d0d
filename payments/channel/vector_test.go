package channel

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/cvmgo/cvm/did"
)

// vector is testdata/subrav.out.json, made by the reference kit
// (@nuwa-ai/payment-kit).
type vector struct {
	SubRAV          json.RawMessage `json:"subrav"`
	BCSHex          string          `json:"bcs_hex"`
	SeedHex         string          `json:"ed25519_seed_hex"`
	SignatureHex    string          `json:"signature_hex"`
	RequestJSON     string          `json:"request_payload_json"`
	RequestHeader   string          `json:"x_payment_channel_data_request"`
	ResponseJSON    string          `json:"response_payload_json"`
	ResponseHeader  string          `json:"x_payment_channel_data_response"`
	ErrorJSON       string          `json:"error_402_payload_json"`
	ResultsResource json.RawMessage `json:"mcp_result_payment_resource"`
}

func loadVector(t testing.TB) vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/subrav.out.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func vectorSubRAV(t *testing.T) SubRAV {
	t.Helper()
	var r SubRAV
	if err := json.Unmarshal(loadVector(t).SubRAV, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestVector_BCS(t *testing.T) {
	v := loadVector(t)
	r := vectorSubRAV(t)
	if got := hex.EncodeToString(r.BCS()); got != v.BCSHex {
		t.Fatalf("BCS\n got %s\nwant %s", got, v.BCSHex)
	}
	want, _ := hex.DecodeString(v.BCSHex)
	back, err := ParseBCS(want)
	if err != nil || back != r {
		t.Fatalf("ParseBCS = %+v, %v; want %+v", back, err, r)
	}
}

func TestVector_SignatureThroughDIDSigner(t *testing.T) {
	v := loadVector(t)
	seed, _ := hex.DecodeString(v.SeedHex)
	signer, err := did.NewKeySigner(did.Ed25519, seed)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := Sign(t.Context(), signer, vectorSubRAV(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(signed.Signature); got != v.SignatureHex {
		t.Fatalf("signature\n got %s\nwant %s", got, v.SignatureHex)
	}
	if err := signed.Verify(signer.PublicKey()); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	signed.SubRAV.Nonce++
	if err := signed.Verify(signer.PublicKey()); err == nil {
		t.Fatal("a changed receipt verifies")
	}
}

func TestVector_PayloadsAndHeaders(t *testing.T) {
	v := loadVector(t)
	seed, _ := hex.DecodeString(v.SeedHex)
	signer, _ := did.NewKeySigner(did.Ed25519, seed)
	r := vectorSubRAV(t)
	signed, err := Sign(t.Context(), signer, r)
	if err != nil {
		t.Fatal(err)
	}
	next := r
	next.Nonce, next.AccumulatedAmount = 4, 2000000
	cases := []struct {
		name, json, header string
		p                  Payload
	}{
		{"request", v.RequestJSON, v.RequestHeader,
			Payload{Version: 1, ClientTxRef: "tx-0002", MaxAmount: 1000000, SignedSubRAV: &signed}},
		{"response", v.ResponseJSON, v.ResponseHeader,
			Payload{Version: 1, ClientTxRef: "tx-0002", ServiceTxRef: "srv-42", SubRAV: &next, Cost: 500000, CostUSD: 5000000000}},
		{"error", v.ErrorJSON, "",
			Payload{Version: 1, ClientTxRef: "tx-0003", SubRAV: &next,
				Error: &PayloadError{Code: "PAYMENT_REQUIRED", Message: "Signature required for pending proposal"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MarshalPayload(&c.p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.json {
				t.Fatalf("JSON\n got %s\nwant %s", got, c.json)
			}
			back, err := UnmarshalPayload([]byte(c.json))
			if err != nil {
				t.Fatal(err)
			}
			again, _ := MarshalPayload(&back)
			if !bytes.Equal(again, got) {
				t.Fatalf("decoded and encoded again\n got %s\nwant %s", again, got)
			}
			if c.header == "" {
				return
			}
			h, err := EncodeHeader(&c.p)
			if err != nil || h != c.header {
				t.Fatalf("header\n got %s (%v)\nwant %s", h, err, c.header)
			}
			dec, err := DecodeHeader(c.header)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := MarshalPayload(&dec); string(again) != c.json {
				t.Fatalf("header decoded to %s", again)
			}
		})
	}
	// The vector's request verifies as it arrives.
	p, err := DecodeHeader(v.RequestHeader)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SignedSubRAV.Verify(signer.PublicKey()); err != nil {
		t.Fatalf("the vector's header does not verify: %v", err)
	}
}
