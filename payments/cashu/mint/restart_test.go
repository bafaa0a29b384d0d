package mint

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/cashu"
)

// reopen starts a second mint with the fixture's Lightning and seed over
// a store reopened from dir, as a restarted mint-sim does.
func reopen(t *testing.T, f *fixture, dir string) *fixture {
	t.Helper()
	f.m.Close()
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := durable.Open(dir, "mint", durable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mw, _ := f.net.Wallet("mint")
	m, err := New(Options{Store: st, Lightning: mw, Seed: testSeed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &fixture{m: m, net: f.net, alice: f.alice, st: st}
}

func fileFixture(t *testing.T) (*fixture, string) {
	dir := t.TempDir()
	st, err := durable.Open(dir, "mint", durable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, func(o *Options) { o.Store = st }), dir
}

func TestMint_RestartKeepsSpentSecrets(t *testing.T) {
	f, dir := fileFixture(t)
	proofs := f.mint(t, 2, 8)
	kept, err := f.swap(t, proofs, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	id := f.m.Keyset().ID
	g := reopen(t, f, dir)
	if g.m.Keyset().ID != id {
		t.Fatal("the keyset changed across a restart")
	}
	if st := g.states(t, proofs...); st[0] != cashu.StateSpent || st[1] != cashu.StateSpent {
		t.Fatalf("spent proofs after a restart: %v", st)
	}
	_, err = g.swap(t, proofs, 2, 8)
	wantCode(t, err, cashu.CodeProofsSpent)
	// What was issued before the restart is still good.
	if _, err := g.swap(t, kept, 10); err == nil {
		t.Fatal("10 is not a power of two: the swap must be refused")
	}
	if _, err := g.swap(t, kept, 2, 8); err != nil {
		t.Fatal(err)
	}
}

// TestMint_RestartMidSwap: a mint that stopped after claiming a swap's
// proofs and before answering neither loses them nor takes them twice: the
// same swap sent again is answered, any other is refused.
func TestMint_RestartMidSwap(t *testing.T) {
	f, dir := fileFixture(t)
	proofs := f.mint(t, 4, 4)
	outs := f.outputs(t, 8)
	req := cashu.SwapRequest{Inputs: proofs, Outputs: cashu.Messages(outs)}
	in, _, _, err := f.m.checkInputs(req.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	checked, _, _ := f.m.checkOutputs(req.Outputs, false)
	keys := claims(in, checked)
	// The swap's claims, and then the crash.
	if c, err := f.m.claimAll(context.Background(), keys, digest("swap", "", keys, req.Outputs)); err != nil || c >= 0 {
		t.Fatalf("claim: %d %v", c, err)
	}
	g := reopen(t, f, dir)
	if _, err := g.swap(t, proofs, 8); err == nil {
		t.Fatal("another swap of claimed proofs succeeded")
	}
	resp, err := g.m.Swap(context.Background(), req)
	if err != nil {
		t.Fatalf("the interrupted swap sent again: %v", err)
	}
	got := g.unblind(t, outs, resp.Signatures)
	if _, err := g.swap(t, got, 8); err != nil {
		t.Fatal(err)
	}
}

func TestSwap_ConcurrentSwapsOfOneProofOneWins(t *testing.T) {
	f := newFixture(t, nil)
	const racers = 8
	proofs := f.mint(t, 32)
	outs := make([][]cashu.Output, racers)
	for i := range outs {
		outs[i] = f.outputs(t, 16, 16)
	}
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-start
			_, errs[i] = f.m.Swap(context.Background(), cashu.SwapRequest{Inputs: proofs, Outputs: cashu.Messages(outs[i])})
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		wantCode(t, err, cashu.CodeProofsSpent)
	}
	if won != 1 {
		t.Fatalf("%d swaps of one proof won, want 1", won)
	}
}

// TestSwap_LosingSwapReleasesItsOtherInputs: a swap whose second input is
// spent already must not keep its first one.
func TestSwap_LosingSwapReleasesItsOtherInputs(t *testing.T) {
	f := newFixture(t, nil)
	a, b := f.mint(t, 1), f.mint(t, 2)
	if _, err := f.swap(t, b, 2); err != nil {
		t.Fatal(err)
	}
	_, err := f.swap(t, append(a, b...), 1, 2)
	wantCode(t, err, cashu.CodeProofsSpent)
	if st := f.states(t, a...); !reflect.DeepEqual(st, []string{cashu.StateUnspent}) {
		t.Fatalf("the losing swap's other input is %v", st)
	}
	if _, err := f.swap(t, a, 1); err != nil {
		t.Fatal(err)
	}
}
