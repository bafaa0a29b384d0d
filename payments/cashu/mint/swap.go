package mint

import (
	"context"

	"github.com/cvmgo/cvm/payments/cashu"
)

// Swap spends inputs for signatures on outputs of the same value less the
// input fee (NUT-03). Every input is verified before any is claimed; then
// inputs and outputs are claimed together, or none is: of two swaps of
// one proof, exactly one wins. The same swap sent again is answered with
// the same signatures.
//
// The signatures are computed on a goroutine of their own while the
// inputs are verified (each about half of a small swap's time, and a
// wallet waits on both), and handed out only once the inputs are
// verified and everything is claimed: a signature is money, and
// computing one early gives nothing away. (A request refused for its
// inputs costs its signing too; mint-sim serves its own machine.)
func (m *Mint) Swap(ctx context.Context, req cashu.SwapRequest) (cashu.SwapResponse, error) {
	outs, outSum, outErr := m.checkOutputs(req.Outputs, false)
	var signing chan signed
	if outErr == nil && len(outs) > 0 {
		signing = make(chan signed, 1)
		go func() {
			sigs, err := m.sign(outs)
			signing <- signed{sigs, err}
		}()
	}
	err := m.spend(ctx, req, outs, outSum, outErr)
	if signing == nil {
		return cashu.SwapResponse{}, err
	}
	s := <-signing // the goroutine ends whatever spend said
	switch {
	case err != nil:
		return cashu.SwapResponse{}, err
	case s.err != nil:
		return cashu.SwapResponse{}, s.err
	}
	return cashu.SwapResponse{Signatures: s.sigs}, nil
}

// signed is the outcome of signing a swap's outputs.
type signed struct {
	sigs []cashu.BlindSignature
	err  error
}

// spend checks a swap's inputs against its checked outputs (outErr:
// what checking them found), inputs first, and claims inputs and outputs
// together, or none.
func (m *Mint) spend(ctx context.Context, req cashu.SwapRequest, outs []output, outSum uint64, outErr error) error {
	in, inSum, fee, err := m.checkInputs(req.Inputs)
	switch {
	case err != nil:
		return err
	case len(req.Outputs) == 0:
		return cashu.Errorf(CodeMalformed, "no outputs")
	case outErr != nil:
		return outErr
	case inSum < fee || inSum-fee != outSum:
		return cashu.Errorf(cashu.CodeUnbalanced, "inputs %d less fee %d is not outputs %d", inSum, fee, outSum)
	}
	keys := claims(in, outs)
	return m.claim(ctx, keys, digest("swap", "", keys, req.Outputs), nil)
}

// conflictError is the answer to a request that lost key i of its claims.
func (m *Mint) conflictError(ctx context.Context, k claimKey, i int) error {
	switch k.space {
	case spaceSigned:
		return cashu.Errorf(cashu.CodeOutputsSigned, "an output was signed before")
	case spaceIssued:
		return cashu.Errorf(cashu.CodeQuoteIssued, "the quote's ecash was issued before")
	}
	if st, _ := m.proofState(ctx, k.key); st == cashu.StatePending {
		return cashu.Errorf(cashu.CodeProofsPending, "input %d is pending in a melt", i)
	}
	return cashu.Errorf(cashu.CodeProofsSpent, "input %d is already spent", i)
}
