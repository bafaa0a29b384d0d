package quotation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxAnswerBytes bounds the body of a quotation method's answer: a quote
// or a confirmation is a few hundred bytes, and a server that sends more
// is not trusted with more memory.
const maxAnswerBytes = 1 << 20

// A Buyer buys quotations from one MCP streamable HTTP endpoint: it asks
// the price of one exact call (nip10/quote), pays it within the budget and
// with the wallets of Pay, as a CEP-8 client pays over Nostr, and confirms
// the payment (nip10/confirm). Its methods may be called concurrently.
type Buyer struct {
	// URL is the MCP endpoint the quotation methods are posted to.
	URL string
	// Client sends the requests; it signs them (a didauth.Transport) when
	// the server binds quotations to the caller's DID, as cvm's does.
	Client *http.Client
	// Pay is the budget, wallets, confirmation and reports of the
	// payments the buyer may make; nil makes none.
	Pay *cep8.PayOptions
	// Logger gets what goes wrong beside the answer (default: discard).
	Logger *slog.Logger
	// Signer signs the receipts of a prepaid payment channel
	// (Pay.Channel; see Transport): the DID key Client signs requests
	// with, since the channel is that key's.
	Signer did.Signer

	chOnce sync.Once
	ch     *buyerChannel

	mu     sync.Mutex
	prices map[string]contextvm.Price // by tool, from Learn
}

// Learn takes the prices that a tools/list answer gave its tools
// (_meta[MetaPrice], see PriceOf). Buy holds a quotation for a tool priced
// in usd to that price converted at the client's own rate (Pay.Rates,
// within Pay.Tolerance), as a CEP-8 client holds an invoice over Nostr; a
// tool whose price it never learned is held to the budget only.
func (b *Buyer) Learn(tools []*mcp.Tool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.prices == nil {
		b.prices = map[string]contextvm.Price{}
	}
	for _, t := range tools {
		if p, ok := PriceOf(t); ok {
			b.prices[t.Name] = p
		} else if t != nil {
			delete(b.prices, t.Name)
		}
	}
}

// price is the learned price of tool name; the zero Price if none.
func (b *Buyer) price(name string) contextvm.Price {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.prices[name]
}

// Buy gets a quotation for the call of the tool name with args, pays it
// and confirms it; it returns the quotation id the call names in
// _meta[MetaQuotation]. A payment the buyer will not make (no budget, over
// it, no wallet for the method, not approved, the wallet failed) is a
// *jsonrpc.Error with code contextvm.CodePaymentDeclined and
// contextvm.DeclinedData, returned as is, as over Nostr; any other failure
// (the quote or the confirmation) is wrapped.
func (b *Buyer) Buy(ctx context.Context, name string, args any) (string, error) {
	var q Quote
	if err := b.rpc(ctx, MethodQuote, map[string]any{"name": name, "arguments": args}, &q); err != nil {
		return "", fmt.Errorf("nip10/quote for %s: %w", name, err)
	}
	offer := contextvm.PaymentOffer{Server: b.URL, Method: "tools/call", Capability: "tool:" + name,
		Amount: q.Price.Amount, Unit: q.Price.Unit, PMI: q.Instructions.PMI, PayReq: q.Instructions.PayReq}
	receipt, err := b.pay(ctx, offer, b.price(name))
	if err != nil {
		return "", err
	}
	po := b.Pay
	var st struct {
		Status string `json:"status"`
	}
	if err := b.rpc(ctx, MethodConfirm, map[string]any{"quotation_id": q.ID, "payment_proof": receipt.Preimage}, &st); err != nil {
		if po.Report != nil {
			po.Report(contextvm.PaymentReport{PaymentOffer: offer, Rejected: true, Message: err.Error()})
		}
		return "", fmt.Errorf("paid %d %s for %s, but the server did not confirm the payment (quotation %s): %w", offer.Amount, offer.Unit, name, q.ID, err)
	}
	if po.Report != nil {
		po.Report(contextvm.PaymentReport{PaymentOffer: offer, Accepted: true})
	}
	return q.ID, nil
}

// pay pays an offer for a call of the tool priced price under the budget
// (the per-call cap and the daily limits), at most the tolerance above a
// usd price at the client's rate, with the wallet for its payment method,
// once approved.
func (b *Buyer) pay(ctx context.Context, offer contextvm.PaymentOffer, price contextvm.Price) (payments.Receipt, error) {
	return b.payAs(ctx, offer, price, false)
}

// payAs is pay, or with deposit the payment of a channel's deposit, which
// counts against the daily limits but not the per-call cap
// (Budget.ReserveDeposit), and is in sats whatever a tool's price.
func (b *Buyer) payAs(ctx context.Context, offer contextvm.PaymentOffer, price contextvm.Price, deposit bool) (payments.Receipt, error) {
	po := b.Pay
	declined := func(reason string, err error) error {
		if po != nil && po.Report != nil {
			po.Report(contextvm.PaymentReport{PaymentOffer: offer, Err: err})
		}
		data, _ := json.Marshal(contextvm.DeclinedData{Reason: reason, Amount: offer.Amount, Unit: offer.Unit, PMI: offer.PMI, Server: offer.Server})
		return &jsonrpc.Error{Code: contextvm.CodePaymentDeclined, Message: fmt.Sprintf("%s costs %d %s and was not paid: %v", offer.Capability, offer.Amount, offer.Unit, err), Data: data}
	}
	switch {
	case po == nil:
		return payments.Receipt{}, declined(contextvm.DeclinedNoPayments, errors.New("this client makes no payments"))
	case po.Budget == nil:
		return payments.Receipt{}, declined(contextvm.DeclinedNoCap, payments.ErrNoCap)
	}
	usd, _, err := po.USDLimit(ctx, price)
	if err != nil {
		return payments.Receipt{}, declined(contextvm.DeclinedNoRate, err)
	}
	reserve, checked := po.Budget.Reserve, offer.Amount
	if deposit {
		reserve, checked = po.Budget.ReserveDeposit, 0
	}
	if err := po.Budget.Check(offer.Server, checked, offer.Unit); err != nil {
		return payments.Receipt{}, declined(cep8.BudgetReason(err), err)
	}
	if err := usd.Check(offer.Amount); err != nil {
		return payments.Receipt{}, declined(contextvm.DeclinedOverRate, err)
	}
	var h payments.Handler
	for _, c := range po.Handlers {
		if c.PMI() == offer.PMI {
			h = c
		}
	}
	if h == nil {
		return payments.Receipt{}, declined(contextvm.DeclinedNoHandler, fmt.Errorf("no wallet here pays %s", offer.PMI))
	}
	if po.Confirm != nil && !po.Confirm(ctx, offer) {
		return payments.Receipt{}, declined(contextvm.DeclinedByPerson, errors.New("payment not approved"))
	}
	if err := reserve(ctx, offer.Server, offer.Amount, offer.Unit); err != nil {
		return payments.Receipt{}, declined(cep8.BudgetReason(err), err)
	}
	receipt, err := h.Pay(ctx, payments.PaymentRequired{Amount: offer.Amount, PayReq: offer.PayReq, PMI: offer.PMI}, offer.Amount)
	if err != nil {
		if rerr := po.Budget.Refund(context.WithoutCancel(ctx), offer.Server, offer.Amount); rerr != nil {
			b.logger().Warn("could not give back an unspent budget reservation", "err", rerr)
		}
		return payments.Receipt{}, declined(contextvm.DeclinedWallet, err)
	}
	if po.Report != nil {
		po.Report(contextvm.PaymentReport{PaymentOffer: offer, Paid: true, Receipt: receipt})
	}
	return receipt, nil
}

func (b *Buyer) logger() *slog.Logger {
	if b.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Logger
}

// rpc sends one JSON-RPC request outside the MCP session (the quotation
// methods, which the server answers before MCP) and decodes its result.
func (b *Buyer) rpc(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", b.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	hc := b.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, oneLine(string(raw)))
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: the server answered something other than JSON-RPC: %w", method, err)
	}
	if r.Error != nil {
		return r.Error
	}
	return json.Unmarshal(r.Result, result)
}

// oneLine makes a body fit an error message: its words on one line, at
// most 500 bytes of them.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// Priced reports whether a tools/list answer priced the tool
// (_meta[MetaPrice]).
func Priced(t *mcp.Tool) bool {
	if t == nil || t.Meta == nil {
		return false
	}
	_, ok := t.Meta[MetaPrice]
	return ok
}

// PriceOf is the price a tools/list answer gave tool t (_meta[MetaPrice])
// as a contextvm.Price of "tool:NAME": the amount as a plain decimal
// (0.05 for a usd price, "MIN-MAX" for a range; "?" when it cannot be
// read) and the unit. ok is false for a tool not priced. The _meta is the
// server's word: PriceOf reads any JSON.
func PriceOf(t *mcp.Tool) (p contextvm.Price, ok bool) {
	if !Priced(t) {
		return contextvm.Price{}, false
	}
	p = contextvm.Price{Capability: "tool:" + t.Name, Amount: "?"}
	var v struct {
		Amount json.Number `json:"amount"`
		Max    json.Number `json:"max"`
		Unit   string      `json:"unit"`
	}
	b, err := json.Marshal(t.Meta[MetaPrice])
	if err != nil || json.Unmarshal(b, &v) != nil {
		return p, true
	}
	lo, err := strconv.ParseFloat(v.Amount.String(), 64)
	if err != nil || lo < 0 || lo > maxPrice {
		return p, true
	}
	p.Amount, p.Unit = strconv.FormatFloat(lo, 'f', -1, 64), v.Unit
	if hi, err := strconv.ParseFloat(v.Max.String(), 64); err == nil && hi > lo && hi <= maxPrice {
		p.Amount += "-" + strconv.FormatFloat(hi, 'f', -1, 64)
	}
	return p, true
}

// maxPrice bounds the amounts PriceOf reads: more is no price (as
// contextvm.Price.Range says), and would print as hundreds of digits.
const maxPrice = 1 << 53

// IsRequired reports a priced call refused for want of a quotation
// (CodeQuotationRequired).
func IsRequired(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == CodeQuotationRequired
}
