package mint

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/payments/cashu"
)

// TestHandler_RefusesBadInput: each bad request is answered 400 with the
// NUT error body of its code, and spends nothing.
func TestHandler_RefusesBadInput(t *testing.T) {
	f := newFixture(t, nil)
	spent := f.mint(t, 1, 2)
	if _, err := f.swap(t, spent, 1, 2); err != nil {
		t.Fatal(err)
	}
	id := f.m.Keyset().ID
	fresh := func() []cashu.Proof { return f.mint(t, 1, 2) }
	msgs := func(amounts ...uint64) []cashu.BlindedMessage { return cashu.Messages(f.outputs(t, amounts...)) }

	forged := fresh()
	forged[0].C = forged[1].C // a valid point, not the signature on this secret
	wrongKeyset := fresh()
	wrongKeyset[0].ID = "00ffffffffffffff"
	dupIn := fresh()
	dupIn = append(dupIn, dupIn[0])
	dupOut := msgs(1, 1)
	dupOut[1] = dupOut[0]
	dupOut = append(dupOut, msgs(1)...)
	badPoint := msgs(1, 2)
	badPoint[0].B = "02" + strings.Repeat("zz", 32)
	offCurve := msgs(1, 2)
	offCurve[0].B = "04" + offCurve[0].B[2:]
	badAmount := msgs(3)
	nut10 := fresh()
	nut10[0].Secret = `["P2PK",{"nonce":"00","data":"02aa"}]`
	wrongOutKeyset := msgs(1, 2)
	wrongOutKeyset[0].ID = "00ffffffffffffff"
	tooMany := make([]cashu.BlindedMessage, DefaultMaxProofs+1)
	for i := range tooMany {
		tooMany[i] = cashu.BlindedMessage{Amount: 1, ID: id, B: "02"}
	}

	for _, tc := range []struct {
		name string
		path string
		body any
		code cashu.ErrorCode
	}{
		{"double spend", "/v1/swap", cashu.SwapRequest{Inputs: spent, Outputs: msgs(1, 2)}, cashu.CodeProofsSpent},
		{"forged signature", "/v1/swap", cashu.SwapRequest{Inputs: forged, Outputs: msgs(1, 2)}, cashu.CodeProofVerificationFailed},
		{"wrong input keyset", "/v1/swap", cashu.SwapRequest{Inputs: wrongKeyset, Outputs: msgs(1, 2)}, cashu.CodeKeysetUnknown},
		{"wrong output keyset", "/v1/swap", cashu.SwapRequest{Inputs: fresh(), Outputs: wrongOutKeyset}, cashu.CodeKeysetUnknown},
		{"unbalanced", "/v1/swap", cashu.SwapRequest{Inputs: fresh(), Outputs: msgs(1, 1, 2)}, cashu.CodeUnbalanced},
		{"duplicate inputs", "/v1/swap", cashu.SwapRequest{Inputs: dupIn, Outputs: msgs(1, 2, 1)}, cashu.CodeDuplicateInputs},
		{"duplicate outputs", "/v1/swap", cashu.SwapRequest{Inputs: fresh(), Outputs: dupOut}, cashu.CodeDuplicateOutputs},
		{"malformed B_", "/v1/swap", cashu.SwapRequest{Inputs: fresh(), Outputs: badPoint}, CodeMalformed},
		{"uncompressed B_", "/v1/swap", cashu.SwapRequest{Inputs: fresh(), Outputs: offCurve}, CodeMalformed},
		{"amount not in keyset", "/v1/swap", cashu.SwapRequest{Inputs: fresh(), Outputs: badAmount}, CodeMalformed},
		{"NUT-10 secret", "/v1/swap", cashu.SwapRequest{Inputs: nut10, Outputs: msgs(1, 2)}, cashu.CodeProofVerificationFailed},
		{"too many outputs", "/v1/swap", cashu.SwapRequest{Inputs: fresh(), Outputs: tooMany}, cashu.CodeMaxOutputsExceeded},
		{"oversized body", "/v1/swap", append([]byte(`{"inputs":"`), append(bytes.Repeat([]byte("a"), maxBody), '"', '}')...), CodeMalformed},
		{"not JSON", "/v1/swap", []byte(`{"inputs":[{"secret":`), CodeMalformed},
		{"no inputs", "/v1/swap", cashu.SwapRequest{Outputs: msgs(1)}, CodeMalformed},
		{"wrong unit quote", "/v1/mint/quote/bolt11", cashu.MintQuoteBolt11Request{Amount: 5, Unit: "usd"}, cashu.CodeUnitNotSupported},
		{"wrong unit melt", "/v1/melt/quote/bolt11", cashu.MeltQuoteBolt11Request{Request: "lnbcrt1", Unit: "eur"}, cashu.CodeUnitNotSupported},
		{"not an invoice", "/v1/melt/quote/bolt11", cashu.MeltQuoteBolt11Request{Request: "lnbcrt1", Unit: "sat"}, CodeMalformed},
		{"amount too large", "/v1/mint/quote/bolt11", cashu.MintQuoteBolt11Request{Amount: DefaultMaxAmount + 1, Unit: "sat"}, cashu.CodeAmountOutsideLimit},
		{"unknown quote", "/v1/mint/bolt11", cashu.MintBolt11Request{Quote: "nope", Outputs: msgs(1)}, CodeMalformed},
		{"bad Y", "/v1/checkstate", cashu.CheckStateRequest{Ys: []string{"00"}}, CodeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []cashu.Proof
			if r, ok := tc.body.(cashu.SwapRequest); ok {
				in = r.Inputs
			}
			status, body := f.post(t, tc.path, tc.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d, body %v", status, body)
			}
			if code, _ := body["code"].(float64); cashu.ErrorCode(code) != tc.code || body["detail"] == "" {
				t.Fatalf("body %v, want code %d", body, tc.code)
			}
			// A refused swap spends none of its valid inputs.
			if tc.code != cashu.CodeProofsSpent && len(in) > 0 && in[1].C != "" {
				if st := f.states(t, in[1]); st[0] != cashu.StateUnspent {
					t.Fatalf("input of a refused swap is %s", st[0])
				}
			}
			// The answer never echoes a secret.
			b, _ := json.Marshal(body)
			for _, p := range in {
				if strings.Contains(string(b), p.Secret) {
					t.Fatal("error body carries a secret")
				}
			}
		})
	}
}

func TestHandler_ServesKeysKeysetsAndInfo(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.InputFeePPK = 100 })
	get := func(path string, v any) int {
		rec := httptestGet(t, f.m.Handler(), path)
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return rec.Code
	}
	var keys cashu.KeysResponse
	get("/v1/keys", &keys)
	if len(keys.Keysets) != 1 || len(keys.Keysets[0].Keys) != keysetAmounts || keys.Keysets[0].Unit != "sat" {
		t.Fatalf("keys %+v", keys)
	}
	// What a wallet checks: the id derives from the keys (NUT-02).
	var sets cashu.KeysetsResponse
	get("/v1/keysets", &sets)
	ks, err := cashu.NewKeyset(sets.Keysets[0], keys.Keysets[0].Keys)
	if err != nil || ks.ID != f.m.Keyset().ID || ks.InputFeePPK != 100 || !ks.Active {
		t.Fatalf("keyset %+v: %v", sets, err)
	}
	var one cashu.KeysResponse
	if get("/v1/keys/"+ks.ID, &one); one.Keysets[0].ID != ks.ID {
		t.Fatalf("keys of %s: %+v", ks.ID, one)
	}
	var e cashu.Error
	if code := get("/v1/keys/00ffffffffffffff", &e); code != http.StatusBadRequest || e.Code != cashu.CodeKeysetUnknown {
		t.Fatalf("unknown keyset: %d %+v", code, e)
	}
	var info map[string]any
	get("/v1/info", &info)
	nuts, _ := info["nuts"].(map[string]any)
	for _, n := range []string{"4", "5", "7", "8", "12"} {
		if nuts[n] == nil {
			t.Errorf("info lacks NUT-%s: %v", n, info)
		}
	}
}
