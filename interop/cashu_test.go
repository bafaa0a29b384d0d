package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/cashu"
	cashuwallet "github.com/cvmgo/cvm/payments/cashu/wallet"
)

// requireCashuModules fails (not skips) when interop/cashu's pinned
// @cashu/cashu-ts is missing.
func requireCashuModules(t *testing.T) {
	t.Helper()
	requireNodeModules(t)
	if _, err := os.Stat(filepath.Join("cashu", "node_modules", "@cashu", "cashu-ts")); err != nil {
		t.Fatal("interop/cashu/node_modules/@cashu/cashu-ts is missing; run: make interop-deps")
	}
}

// cashuTS runs one operation of cashu/cashu.mjs (@cashu/cashu-ts) with in
// as its input and decodes its result into out; the operation failing
// fails t.
func cashuTS(t *testing.T, op string, in, out any) {
	t.Helper()
	requireCashuModules(t)
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cvmtest.Run(t, "node", cvmtest.Options{Env: os.Environ(), Dir: "cashu", Stdin: bytes.NewReader(body)}, "cashu.mjs", op)
	var failed struct{ Error string }
	if json.Unmarshal([]byte(stdout), &failed); code != 0 || failed.Error != "" {
		t.Fatalf("cashu-ts %s: exit %d: %s; stdout %q; stderr: %s", op, code, failed.Error, stdout, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("cashu-ts %s: %v in %s", op, err, stdout)
	}
}

// TestCashu_HashToCurveAgrees: cvm's hash_to_curve (NUT-00) and
// cashu-ts's map the same messages to the same points: the NUTs' vectors
// and random ones.
func TestCashu_HashToCurveAgrees(t *testing.T) {
	msgs := []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0000000000000000000000000000000000000000000000000000000000000001",
		"0000000000000000000000000000000000000000000000000000000000000002",
		hex.EncodeToString([]byte("a secret as wallets write them")),
	}
	for range 8 {
		b := make([]byte, 32)
		rand.Read(b)
		msgs = append(msgs, hex.EncodeToString(b))
	}
	var ts struct{ Points []string }
	cashuTS(t, "hash-to-curve", map[string]any{"messages": msgs}, &ts)
	if len(ts.Points) != len(msgs) {
		t.Fatalf("cashu-ts mapped %d of %d messages", len(ts.Points), len(msgs))
	}
	for i, m := range msgs {
		b, _ := hex.DecodeString(m)
		y, err := cashu.HashToCurve(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := cashu.PointHex(y); got != ts.Points[i] {
			t.Errorf("hash_to_curve(%s): cvm %s, cashu-ts %s", m, got, ts.Points[i])
		}
	}
}

// cashuFixture is a token of real proofs: signed by a throw-away mint key
// per amount, each with its DLEQ proof and blinding factor, as a wallet
// sends them.
func cashuFixture(t *testing.T) cashu.Token {
	t.Helper()
	amounts := []uint64{1, 2, 8, 64}
	priv := map[uint64]*btcec.PrivateKey{}
	pub := map[uint64]*btcec.PublicKey{}
	for _, a := range amounts {
		k, err := btcec.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		priv[a], pub[a] = k, k.PubKey()
	}
	id := cashu.KeysetID(pub)
	outputs, err := cashu.NewOutputs(id, amounts)
	if err != nil {
		t.Fatal(err)
	}
	tok := cashu.Token{Mint: "http://127.0.0.1:3338", Unit: "sat", Memo: "for the fixture & <tests>"}
	for _, o := range outputs {
		sig, err := cashu.SignOutput(priv[o.Message.Amount], o.Message)
		if err != nil {
			t.Fatal(err)
		}
		p, err := o.Proof(sig, pub[o.Message.Amount])
		if err != nil {
			t.Fatal(err)
		}
		tok.Proofs = append(tok.Proofs, p)
	}
	return tok
}

// TestCashu_TokenEncodingsAgree: a token cvm encodes as cashuA (V3, which
// cashu-ts reads but cannot write) and as cashuB (V4) decodes in cashu-ts
// to the same mint, unit, memo and proofs, DLEQ proofs included; and a
// cashuB token cashu-ts encodes decodes in cvm to the token it was given.
func TestCashu_TokenEncodingsAgree(t *testing.T) {
	tok := cashuFixture(t)
	for _, enc := range []struct {
		name   string
		encode func() (string, error)
	}{{"cashuA", tok.EncodeV3}, {"cashuB", tok.EncodeV4}} {
		s, err := enc.encode()
		if err != nil {
			t.Fatal(err)
		}
		var ts struct{ Token cashu.Token }
		cashuTS(t, "decode", map[string]any{"token": s}, &ts)
		if !reflect.DeepEqual(ts.Token, tok) {
			t.Errorf("%s made by cvm, decoded by cashu-ts:\n got %s\nwant %s", enc.name, jsonOf(tokenJSON(ts.Token)), jsonOf(tokenJSON(tok)))
		}
	}
	var ts struct{ Encoded string }
	cashuTS(t, "encode", map[string]any{"token": tokenJSON(tok)}, &ts)
	got, err := cashu.DecodeToken(ts.Encoded)
	if err != nil {
		t.Fatalf("cvm decoding cashu-ts's cashuB: %v", err)
	}
	if !reflect.DeepEqual(got, tok) {
		t.Errorf("cashuB made by cashu-ts, decoded by cvm:\n got %s\nwant %s", jsonOf(tokenJSON(got)), jsonOf(tokenJSON(tok)))
	}
}

// tokenJSON is a token as cashu-ts holds one (cashu.Token has no JSON
// form of its own: it travels encoded).
func tokenJSON(tok cashu.Token) map[string]any {
	return map[string]any{"mint": tok.Mint, "unit": tok.Unit, "memo": tok.Memo, "proofs": tok.Proofs}
}

// jsonOf shows a test fixture (throw-away proofs) in a failure message.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestCashu_PaymentRequestAgrees: a NUT-18 creqA request made by cvm reads
// the same in cashu-ts, and one made by cashu-ts reads the same in cvm.
func TestCashu_PaymentRequestAgrees(t *testing.T) {
	req := cashu.PaymentRequest{
		ID: "b7a90176", Amount: 21, Unit: "sat", SingleUse: true,
		Mints:       []string{"http://127.0.0.1:3338", "https://mint.example.com"},
		Description: "a paid tool call",
		Transports:  []cashu.Transport{{Type: "nostr", Target: "nprofile1qy28wumn8ghj7un9d3shjtnyv9kh2uewd9hsz9mhwden5te0wfjkccte9curxven9eehqctrv5hszrthwden5te0dehhxtnvdakqqgydaqy7curk439ykptkysv7udhdhu68sucm295akqefdehkf0d495cwunl5", Tags: [][]string{{"n", "17"}}}},
		NUT10:       &cashu.NUT10Option{Kind: "P2PK", Data: "026562efcfadc8e86d44da6a8adf80633d974302e62c850774db1fb36ff4cc7198", Tags: [][]string{{"locktime", "1700000000"}}},
	}
	s, err := req.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var raw struct{ Request map[string]any }
	cashuTS(t, "creq-decode", map[string]any{"creq": s}, &raw)
	want := map[string]any{
		"i": "b7a90176", "a": 21.0, "u": "sat", "s": true, "d": "a paid tool call",
		"m":     []any{"http://127.0.0.1:3338", "https://mint.example.com"},
		"t":     []any{map[string]any{"t": "nostr", "a": req.Transports[0].Target, "g": []any{[]any{"n", "17"}}}},
		"nut10": map[string]any{"k": "P2PK", "d": req.NUT10.Data, "t": []any{[]any{"locktime", "1700000000"}}},
	}
	if !reflect.DeepEqual(raw.Request, want) {
		t.Errorf("creqA made by cvm, read by cashu-ts:\n got %v\nwant %v", raw.Request, want)
	}
	var ts struct{ Encoded string }
	cashuTS(t, "creq-encode", map[string]any{"request": want}, &ts)
	got, err := cashu.DecodePaymentRequest(ts.Encoded)
	if err != nil {
		t.Fatalf("cvm reading cashu-ts's creqA: %v", err)
	}
	if !reflect.DeepEqual(got, req) {
		t.Errorf("creqA made by cashu-ts, read by cvm:\n got %+v\nwant %+v", got, req)
	}
}

// TestCashu_DirectPaymentRequestAgrees: the NUT-18 request a cvm gateway
// taking Cashu sends in payment_required (cashu/wallet's Redeemer) reads
// in cashu-ts as the price in sats, single use, of the accepted mints,
// with an empty transport list (the token comes back in-band); and the
// same request re-encoded by cashu-ts is one cvm's Bearer reads alike.
func TestCashu_DirectPaymentRequestAgrees(t *testing.T) {
	mints := []string{"http://127.0.0.1:3338", "https://mint.example.com"}
	red, err := cashuwallet.NewRedeemer(cashuwallet.New(cashuwallet.Options{Dir: t.TempDir()}), mints)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := red.Require(context.Background(), payments.Charge{Amount: 10, Unit: "sats", Description: "tool:add"})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := cashu.DecodePaymentRequest(pr.PayReq)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct{ Request map[string]any }
	cashuTS(t, "creq-decode", map[string]any{"creq": pr.PayReq}, &raw)
	want := map[string]any{"i": ours.ID, "a": 10.0, "u": "sat", "s": true, "m": []any{mints[0], mints[1]}, "t": []any{}}
	if !reflect.DeepEqual(raw.Request, want) || ours.ID == "" {
		t.Fatalf("the gateway's creqA, read by cashu-ts:\n got %v\nwant %v", raw.Request, want)
	}
	var ts struct{ Encoded string }
	cashuTS(t, "creq-encode", map[string]any{"request": raw.Request}, &ts)
	back, err := cashu.DecodePaymentRequest(ts.Encoded)
	if err != nil || !reflect.DeepEqual(back, ours) {
		t.Fatalf("cashu-ts's re-encoding, read by cvm: %+v, %v; want %+v", back, err, ours)
	}
}
