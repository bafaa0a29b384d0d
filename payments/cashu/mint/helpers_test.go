package mint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/cashu"
	"github.com/cvmgo/cvm/payments/lnsim"
)

// testSeed is a fixed seed: tests that reopen a mint get the same keyset.
var testSeed = bytes.Repeat([]byte{7}, 32)

// fixture is a mint over a simulated Lightning network, with a wallet
// "alice" that pays its invoices.
type fixture struct {
	m     *Mint
	net   *lnsim.Network
	alice *lnsim.Wallet
	st    durable.Store
}

// newFixture starts a mint; edit changes its options (Store and Lightning
// are set already).
func newFixture(t testing.TB, edit func(*Options)) *fixture {
	t.Helper()
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mint", "alice"} {
		if _, err := net.AddWallet(name, 1_000_000_000); err != nil {
			t.Fatal(err)
		}
	}
	mw, _ := net.Wallet("mint")
	alice, _ := net.Wallet("alice")
	opts := Options{Store: durable.NewMemory(durable.Options{}), Lightning: mw, Seed: testSeed}
	if edit != nil {
		edit(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &fixture{m: m, net: net, alice: alice, st: opts.Store}
}

// outputs makes blinded outputs of the mint's keyset for amounts.
func (f *fixture) outputs(t testing.TB, amounts ...uint64) []cashu.Output {
	t.Helper()
	outs, err := cashu.NewOutputs(f.m.Keyset().ID, amounts)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

// unblind turns signatures on outs into proofs, checking each DLEQ proof
// as a wallet must.
func (f *fixture) unblind(t *testing.T, outs []cashu.Output, sigs []cashu.BlindSignature) []cashu.Proof {
	t.Helper()
	if len(sigs) != len(outs) {
		t.Fatalf("%d signatures for %d outputs", len(sigs), len(outs))
	}
	proofs := make([]cashu.Proof, len(outs))
	for i, o := range outs {
		p, err := o.Proof(sigs[i], f.m.Keyset().Keys[o.Message.Amount])
		if err != nil {
			t.Fatalf("output %d: %v", i, err)
		}
		proofs[i] = p
	}
	return proofs
}

// mint mints proofs of amounts, paid by alice.
func (f *fixture) mint(t *testing.T, amounts ...uint64) []cashu.Proof {
	t.Helper()
	ctx := context.Background()
	var total uint64
	for _, a := range amounts {
		total += a
	}
	q, err := f.m.MintQuote(ctx, cashu.MintQuoteBolt11Request{Amount: total, Unit: "sat"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.PayInvoice(ctx, q.Request); err != nil {
		t.Fatal(err)
	}
	outs := f.outputs(t, amounts...)
	resp, err := f.m.MintTokens(ctx, cashu.MintBolt11Request{Quote: q.Quote, Outputs: cashu.Messages(outs)})
	if err != nil {
		t.Fatal(err)
	}
	return f.unblind(t, outs, resp.Signatures)
}

// swap swaps proofs for outputs of amounts.
func (f *fixture) swap(t *testing.T, in []cashu.Proof, amounts ...uint64) ([]cashu.Proof, error) {
	t.Helper()
	outs := f.outputs(t, amounts...)
	resp, err := f.m.Swap(context.Background(), cashu.SwapRequest{Inputs: in, Outputs: cashu.Messages(outs)})
	if err != nil {
		return nil, err
	}
	return f.unblind(t, outs, resp.Signatures), nil
}

// states returns the NUT-07 states of proofs.
func (f *fixture) states(t *testing.T, proofs ...cashu.Proof) []string {
	t.Helper()
	req := cashu.CheckStateRequest{}
	for _, p := range proofs {
		y, err := p.Y()
		if err != nil {
			t.Fatal(err)
		}
		req.Ys = append(req.Ys, y)
	}
	resp, err := f.m.CheckState(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(resp.States))
	for i, s := range resp.States {
		out[i] = s.State
	}
	return out
}

// wantCode fails unless err is a mint error with code.
func wantCode(t *testing.T, err error, code cashu.ErrorCode) {
	t.Helper()
	var ce *cashu.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("error %v, want code %d", err, code)
	}
}

// post sends body to the mint's handler and returns the status and the
// decoded answer.
func (f *fixture) post(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	b, ok := body.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	f.m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(b)))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s answered %d with %q", path, rec.Code, rec.Body.String())
	}
	return rec.Code, out
}

func httptestGet(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}
