package zap

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
)

// Rail is the _meta "rail" of a zap payment request, as the reference
// SDK names it.
const Rail = "nip57"

// meta is payment_required's _meta for a zap: the rail, and the zap
// request as the invoice's description hash commits to it (a string: its
// bytes, not a re-encoding, hash to the description hash).
type meta struct {
	Rail       string `json:"rail"`
	ZapRequest string `json:"zap_request,omitempty"`
}

func newMeta(zr string) json.RawMessage {
	b, _ := json.Marshal(meta{Rail: Rail, ZapRequest: zr})
	return b
}

// CheckMeta checks the zap request a payment request carries in its
// _meta against its invoice: its SHA-256 must be the invoice's
// description hash, and its amount the price (req.Amount sats). checked
// is false when there is none to check (the reference sends only the
// rail), and nothing is said of the invoice then.
func CheckMeta(req payments.PaymentRequired, inv *bolt11.Invoice) (checked bool, err error) {
	var m meta
	if len(req.Meta) == 0 || json.Unmarshal(req.Meta, &m) != nil || m.ZapRequest == "" {
		return false, nil
	}
	zr, err := ParseRequest(m.ZapRequest)
	switch {
	case err != nil:
		return true, fmt.Errorf("%w: %w", ErrMeta, err)
	case zr.AmountMsat != req.Amount*1000:
		return true, fmt.Errorf("%w: the zap request is for %d msat, the price %d sats", ErrMeta, zr.AmountMsat, req.Amount)
	case inv.DescriptionHash == nil || *inv.DescriptionHash != sha256.Sum256([]byte(m.ZapRequest)):
		return true, fmt.Errorf("%w: the invoice's description hash is not the zap request's SHA-256", ErrMeta)
	}
	return true, nil
}

// IsZap reports whether req says it is a zap (its _meta's rail).
func IsZap(req payments.PaymentRequired) bool {
	var m meta
	return len(req.Meta) > 0 && json.Unmarshal(req.Meta, &m) == nil && m.Rail == Rail
}
