package cashu

import "fmt"

// ErrorCode is a NUT error code (the NUTs' error_codes.md), the "code" of
// an error body.
type ErrorCode int

// The codes the mint answers with.
const (
	CodeProofVerificationFailed ErrorCode = 10001
	CodeProofsSpent             ErrorCode = 11001
	CodeProofsPending           ErrorCode = 11002
	CodeOutputsSigned           ErrorCode = 11003
	CodeOutputsPending          ErrorCode = 11004
	CodeUnbalanced              ErrorCode = 11005
	CodeAmountOutsideLimit      ErrorCode = 11006
	CodeDuplicateInputs         ErrorCode = 11007
	CodeDuplicateOutputs        ErrorCode = 11008
	CodeMultipleUnits           ErrorCode = 11009
	CodeUnitMismatch            ErrorCode = 11010
	CodeAmountlessInvoice       ErrorCode = 11011
	CodeAmountNotInvoice        ErrorCode = 11012
	CodeUnitNotSupported        ErrorCode = 11013
	CodeMaxInputsExceeded       ErrorCode = 11014
	CodeMaxOutputsExceeded      ErrorCode = 11015
	CodeKeysetUnknown           ErrorCode = 12001
	CodeKeysetInactive          ErrorCode = 12002
	CodeQuoteNotPaid            ErrorCode = 20001
	CodeQuoteIssued             ErrorCode = 20002
	CodeMintingDisabled         ErrorCode = 20003
	CodeLightningFailed         ErrorCode = 20004
	CodeQuotePending            ErrorCode = 20005
	CodeInvoiceAlreadyPaid      ErrorCode = 20006
	CodeQuoteExpired            ErrorCode = 20007
)

// Error is a mint's error body, {"detail": ..., "code": ...}, and the
// error a wallet gets back for one. Detail never carries a secret: the mint
// writes it from fixed text and indexes, not from what it was sent.
type Error struct {
	Detail string    `json:"detail"`
	Code   ErrorCode `json:"code"`
}

// Errorf returns an *Error with the given code and formatted detail.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("cashu mint error %d: %s", e.Code, e.Detail)
}

// Is matches another *Error by code, so errors.Is(err, &Error{Code: c})
// asks "did the mint answer with code c".
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}
