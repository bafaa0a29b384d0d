package mint

import (
	"context"
	"testing"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/cashu"
)

// BenchmarkSwap is one swap of 2 inputs for 2 outputs, as over HTTP
// minus the HTTP: both inputs verified, claimed in a durable.Open store
// (mint-sim's), both outputs signed with their DLEQ proofs. The inputs
// are made beforehand, signed with the mint's keys directly.
func BenchmarkSwap(b *testing.B) {
	st, err := durable.Open(b.TempDir(), "mint", durable.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	f := newFixture(b, func(o *Options) { o.Store = st })
	id := f.m.Keyset().ID
	k := f.m.ks.priv[4]
	reqs := make([]cashu.SwapRequest, b.N)
	for i := range reqs {
		ins, err := cashu.NewOutputs(id, []uint64{4, 4})
		if err != nil {
			b.Fatal(err)
		}
		var proofs []cashu.Proof
		for _, o := range ins {
			sig, err := cashu.SignOutput(k, o.Message)
			if err != nil {
				b.Fatal(err)
			}
			p, err := o.Proof(sig, k.PubKey())
			if err != nil {
				b.Fatal(err)
			}
			proofs = append(proofs, p)
		}
		outs, err := cashu.NewOutputs(id, []uint64{4, 4})
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = cashu.SwapRequest{Inputs: proofs, Outputs: cashu.Messages(outs)}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.m.Swap(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "swaps/s")
}
