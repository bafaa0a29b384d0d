package quotation

import (
	"errors"

	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON-RPC error codes of the quotation flow: cvm's block -32030..-32039,
// clear of JSON-RPC's, MCP's, seed 002's (-32000..-32007, -32099), CEP-8's
// (-32042, -32043) and cvm's other codes (-32010..-32017). Listed in
// docs/error-codes.md.
const (
	// CodeQuotationRequired answers a priced tools/call that names no
	// quotation; data says how to get one.
	CodeQuotationRequired = -32030
	// CodeQuotationUnknown: the quotation id names no quotation (never
	// issued, or long expired).
	CodeQuotationUnknown = -32031
	// CodeQuotationExpired: the quotation expired before it was confirmed.
	CodeQuotationExpired = -32032
	// CodeQuotationSpent: the quotation already paid for a call.
	CodeQuotationSpent = -32033
	// CodeQuotationNotYours: the quotation was issued to another DID.
	CodeQuotationNotYours = -32034
	// CodeQuotationMismatch: the quotation is for another tool or other
	// arguments than the call naming it.
	CodeQuotationMismatch = -32035
	// CodePaymentProofInvalid: nip10/confirm's proof does not match the
	// quotation's payment (a preimage whose SHA-256 is not the invoice's
	// payment hash), or the payment is not settled.
	CodePaymentProofInvalid = -32036
	// CodeQuotationNotPaid: a tools/call names a quotation not confirmed
	// yet.
	CodeQuotationNotPaid = -32037
	// CodeQuotationAnonymous: quotation methods need a signed request,
	// since a quotation is bound to the caller's DID.
	CodeQuotationAnonymous = -32038
	// codePriceRefused is contextvm.CodePriceRefused: the pricer refused
	// the call, or priced it outside the announced price, or a usd price
	// had no rate to convert it.
	codePriceRefused = -32016
)

// Code is the JSON-RPC code that answers err.
func Code(err error) int64 {
	switch {
	case errors.Is(err, ErrRequired):
		return CodeQuotationRequired
	case errors.Is(err, ErrUnknown):
		return CodeQuotationUnknown
	case errors.Is(err, ErrExpired):
		return CodeQuotationExpired
	case errors.Is(err, ErrSpent):
		return CodeQuotationSpent
	case errors.Is(err, ErrNotYours):
		return CodeQuotationNotYours
	case errors.Is(err, ErrMismatch):
		return CodeQuotationMismatch
	case errors.Is(err, ErrBadProof):
		return CodePaymentProofInvalid
	case errors.Is(err, ErrNotPaid):
		return CodeQuotationNotPaid
	case errors.Is(err, ErrAnonymous):
		return CodeQuotationAnonymous
	case errors.Is(err, payments.ErrRefused), errors.Is(err, payments.ErrOutOfRange), errors.Is(err, payments.ErrNoRate):
		return codePriceRefused
	case errors.Is(err, ErrInvalidInput), errors.Is(err, ErrNotPriced):
		return jsonrpc.CodeInvalidParams
	}
	return jsonrpc.CodeInternalError
}
