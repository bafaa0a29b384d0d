package mint

import (
	"context"
	"encoding/hex"

	"github.com/cvmgo/cvm/payments/cashu"
)

// proofState is NUT-07's state of the proof whose Y is y: UNSPENT with no
// claim, PENDING while a melt it pays for is paying, SPENT otherwise.
func (m *Mint) proofState(ctx context.Context, y []byte) (string, error) {
	_, spent, err := m.st.Get(ctx, spaceSpent, y)
	if err != nil || !spent {
		return cashu.StateUnspent, err
	}
	quote, pending, err := m.st.Get(ctx, spacePending, y)
	if err != nil || !pending {
		return cashu.StateSpent, err
	}
	// A mark left by a melt that ended (a crash before it was cleared)
	// does not make the proof pending: its quote's state decides.
	q, found, err := m.meltQuote(ctx, string(quote))
	if err != nil || !found || q.State != cashu.QuotePending {
		return cashu.StateSpent, err
	}
	return cashu.StatePending, nil
}

// CheckState answers NUT-07: the state of each proof by its Y.
func (m *Mint) CheckState(ctx context.Context, req cashu.CheckStateRequest) (cashu.CheckStateResponse, error) {
	if len(req.Ys) > m.opts.MaxProofs {
		return cashu.CheckStateResponse{}, cashu.Errorf(cashu.CodeMaxInputsExceeded, "%d Ys, at most %d", len(req.Ys), m.opts.MaxProofs)
	}
	out := cashu.CheckStateResponse{States: make([]cashu.ProofState, len(req.Ys))}
	for i, ys := range req.Ys {
		y, err := cashu.ParsePoint(ys)
		if err != nil {
			return cashu.CheckStateResponse{}, cashu.Errorf(CodeMalformed, "Y %d is not a compressed point", i)
		}
		st, err := m.proofState(ctx, y.SerializeCompressed())
		if err != nil {
			return cashu.CheckStateResponse{}, internal("reading proof state", err)
		}
		out.States[i] = cashu.ProofState{Y: hex.EncodeToString(y.SerializeCompressed()), State: st}
	}
	return out, nil
}
