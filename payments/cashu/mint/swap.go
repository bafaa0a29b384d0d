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
func (m *Mint) Swap(ctx context.Context, req cashu.SwapRequest) (cashu.SwapResponse, error) {
	in, inSum, fee, err := m.checkInputs(req.Inputs)
	if err != nil {
		return cashu.SwapResponse{}, err
	}
	if len(req.Outputs) == 0 {
		return cashu.SwapResponse{}, cashu.Errorf(CodeMalformed, "no outputs")
	}
	outs, outSum, err := m.checkOutputs(req.Outputs, false)
	if err != nil {
		return cashu.SwapResponse{}, err
	}
	if inSum < fee || inSum-fee != outSum {
		return cashu.SwapResponse{}, cashu.Errorf(cashu.CodeUnbalanced, "inputs %d less fee %d is not outputs %d", inSum, fee, outSum)
	}
	keys := claims(in, outs)
	if err := m.claim(ctx, keys, digest("swap", "", keys, req.Outputs), nil); err != nil {
		return cashu.SwapResponse{}, err
	}
	sigs, err := m.sign(outs)
	if err != nil {
		return cashu.SwapResponse{}, err
	}
	return cashu.SwapResponse{Signatures: sigs}, nil
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
