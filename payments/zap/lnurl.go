package zap

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/payments/bolt11"
)

// PayParams are an LNURL-pay endpoint's parameters (LUD-06) with NIP-57's
// two fields; amounts in millisatoshis.
type PayParams struct {
	Callback                 string
	MinSendable, MaxSendable int64
	// NostrPubkey signs the endpoint's zap receipts.
	NostrPubkey nostr.PubKey
}

// maxLNURLAnswer bounds what an LNURL-pay endpoint or its callback may
// answer: parameters and an invoice fit in a few kilobytes, and the
// server reads it on a paid call's path.
const maxLNURLAnswer = 64 << 10

// payParamsJSON is the endpoint's answer as sent.
type payParamsJSON struct {
	Status      string          `json:"status"`
	Reason      string          `json:"reason"`
	Tag         string          `json:"tag"`
	Callback    string          `json:"callback"`
	MinSendable json.Number     `json:"minSendable"`
	MaxSendable json.Number     `json:"maxSendable"`
	AllowsNostr json.RawMessage `json:"allowsNostr"`
	NostrPubkey string          `json:"nostrPubkey"`
}

// ParsePayParams reads an LNURL-pay endpoint's answer and checks that a
// zap can be paid through it: tag payRequest, an https callback,
// allowsNostr true and a valid nostrPubkey.
func ParsePayParams(b []byte) (PayParams, error) {
	var j payParamsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return PayParams{}, fmt.Errorf("%w: the answer is not LNURL-pay JSON: %v", ErrPayParams, err)
	}
	if j.Status == "ERROR" {
		return PayParams{}, fmt.Errorf("%w: the endpoint answered an error: %.200q", ErrPayParams, j.Reason)
	}
	if j.Tag != "payRequest" {
		return PayParams{}, fmt.Errorf("%w: tag %.50q, not payRequest", ErrPayParams, j.Tag)
	}
	if string(j.AllowsNostr) != "true" {
		return PayParams{}, fmt.Errorf("%w: no allowsNostr: the endpoint does not publish zap receipts (NIP-57)", ErrPayParams)
	}
	pk, err := nostr.PubKeyFromHex(j.NostrPubkey)
	if err != nil {
		return PayParams{}, fmt.Errorf("%w: nostrPubkey %.80q: %v", ErrPayParams, j.NostrPubkey, err)
	}
	cb, err := url.Parse(j.Callback)
	if err != nil || cb.Scheme != "https" || cb.Host == "" || cb.User != nil || len(j.Callback) > outbound.MaxURLLength {
		return PayParams{}, fmt.Errorf("%w: callback %.200q is not an https URL", ErrPayParams, j.Callback)
	}
	p := PayParams{Callback: j.Callback, NostrPubkey: pk}
	if p.MinSendable, err = msat(j.MinSendable, 1); err != nil {
		return PayParams{}, fmt.Errorf("%w: minSendable: %v", ErrPayParams, err)
	}
	if p.MaxSendable, err = msat(j.MaxSendable, bolt11.MaxAmountMsat); err != nil {
		return PayParams{}, fmt.Errorf("%w: maxSendable: %v", ErrPayParams, err)
	}
	return p, nil
}

// msat reads an amount in millisatoshis, def when absent.
func msat(n json.Number, def int64) (int64, error) {
	if n == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%.40q is not a whole number of msat", n)
	}
	return v, nil
}

// FetchPayParams fetches a's LNURL-pay parameters through f: https only,
// no redirect, at most 64 KiB.
func FetchPayParams(ctx context.Context, f *outbound.Fetcher, a Address) (PayParams, error) {
	res, err := f.Get(ctx, outbound.Request{URL: a.URL(), HTTPSOnly: true, MaxBytes: maxLNURLAnswer})
	if err != nil {
		return PayParams{}, fmt.Errorf("zap: the LNURL-pay parameters of %s: %w", a, err)
	}
	p, err := ParsePayParams(res.Body)
	if err != nil {
		return PayParams{}, fmt.Errorf("%s: %w", a, err)
	}
	return p, nil
}

// FetchInvoice asks the callback of p for an invoice of amountMsat bound
// to the zap request zr (its JSON, as signed), and checks it: a signed
// BOLT11 invoice for exactly amountMsat whose description hash is the
// SHA-256 of zr.
func FetchInvoice(ctx context.Context, f *outbound.Fetcher, p PayParams, amountMsat int64, zr string) (*bolt11.Invoice, string, error) {
	u, err := url.Parse(p.Callback)
	if err != nil {
		return nil, "", fmt.Errorf("%w: callback: %v", ErrPayParams, err)
	}
	q := u.Query()
	q.Set("amount", strconv.FormatInt(amountMsat, 10))
	q.Set("nostr", zr)
	u.RawQuery = q.Encode()
	res, err := f.Get(ctx, outbound.Request{URL: u.String(), HTTPSOnly: true, MaxBytes: maxLNURLAnswer})
	if err != nil {
		return nil, "", fmt.Errorf("zap: the LNURL callback: %w", err)
	}
	pr, err := ParseCallbackAnswer(res.Body)
	if err != nil {
		return nil, "", err
	}
	inv, err := checkInvoice(pr, amountMsat, sha256.Sum256([]byte(zr)))
	return inv, pr, err
}

// ParseCallbackAnswer reads an LNURL-pay callback's answer: the invoice
// ("pr"), or the error it reports.
func ParseCallbackAnswer(b []byte) (string, error) {
	var j struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
		PR     string `json:"pr"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return "", fmt.Errorf("%w: the callback's answer is not JSON: %v", ErrInvoice, err)
	}
	if j.Status == "ERROR" || j.PR == "" {
		return "", fmt.Errorf("%w: the callback gave no invoice: %.200q", ErrInvoice, j.Reason)
	}
	return j.PR, nil
}

// checkInvoice decodes pr (its signature verified) and checks it is for
// amountMsat with descHash as its description hash.
func checkInvoice(pr string, amountMsat int64, descHash [32]byte) (*bolt11.Invoice, error) {
	inv, err := bolt11.Decode(pr)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvoice, err)
	case inv.AmountMsat() != amountMsat:
		return nil, fmt.Errorf("%w: it asks %d msat, not %d", ErrInvoice, inv.AmountMsat(), amountMsat)
	case inv.DescriptionHash == nil || *inv.DescriptionHash != descHash:
		return nil, fmt.Errorf("%w: its description hash is not the zap request's", ErrInvoice)
	}
	return inv, nil
}
