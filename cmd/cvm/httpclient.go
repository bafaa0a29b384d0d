package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// isHTTPServer reports whether a server argument is an MCP streamable
// HTTP endpoint rather than a Nostr server.
func isHTTPServer(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// httpSigner is the DID a client signs HTTP requests as: --did-key's key
// (a 0600 key file), else the configured Nostr identity as did:nostr.
func (a *app) httpSigner(cf clientFlags) (did.Signer, error) {
	if cf.didKey != "" {
		s, err := did.ReadKeyFile(cf.didKey)
		if err != nil {
			return nil, fmt.Errorf("--did-key: %w", err)
		}
		return s, nil
	}
	id, err := a.resolveIdentity(cf.key, clientKey)
	if err != nil {
		return nil, err
	}
	return did.NostrSigner(id.secret), nil
}

// httpClient is the HTTP client of an http(s):// server: every request
// signed with DIDAuthV1 as httpSigner, in the kit's format with
// --auth-compat.
func (a *app) httpClient(cf clientFlags) (*http.Client, did.Signer, error) {
	signer, err := a.httpSigner(cf)
	if err != nil {
		return nil, nil, err
	}
	mode := didauth.Strict
	if cf.authCompat {
		mode = didauth.Compat
	}
	return &http.Client{Transport: &didauth.Transport{Signer: signer, Mode: mode}}, signer, nil
}

// dialHTTP connects to an MCP server over streamable HTTP, every request
// signed with DIDAuthV1.
func (a *app) dialHTTP(ctx context.Context, cf clientFlags, server string, do dialOptions) (*oneShot, error) {
	if do.stream {
		return nil, errors.New("--stream reads a ContextVM open stream (CEP-41), which MCP over HTTP does not have; call it without --stream")
	}
	hc, signer, err := a.httpClient(cf)
	if err != nil {
		return nil, err
	}
	var copts mcp.ClientOptions
	if do.client != nil {
		copts = *do.client
	}
	copts.Capabilities = &mcp.ClientCapabilities{}
	client := mcp.NewClient(&mcp.Implementation{Name: "cvm", Version: currentVersion().Version}, &copts)
	cctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: server, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, remote(fmt.Errorf("initialize at %s: %w", server, err))
	}
	a.log.Debug("connected over HTTP", "server", server, "did", signer.DID())
	return &oneShot{ClientSession: cs, a: a, httpURL: server, buyer: &httpBuyer{url: server, hc: hc, pay: cf.pay, a: a}}, nil
}

// httpBuyer buys quotations from one HTTP server, with the signing client
// and the payments the command may make.
type httpBuyer struct {
	url string
	hc  *http.Client
	pay *cep8.PayOptions
	a   *app
}

// rpc sends one JSON-RPC request outside the MCP session (the quotation
// methods, which the server answers before MCP) and decodes its result.
func (s *httpBuyer) rpc(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", s.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
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

// pricedOverHTTP reports whether tools/list priced the tool (NIP-10's
// _meta["nip10/price"]).
func pricedOverHTTP(t *mcp.Tool) bool {
	if t == nil || t.Meta == nil {
		return false
	}
	_, ok := t.Meta[quotation.MetaPrice]
	return ok
}

// buyQuotation gets a quotation for one call, pays it under the budget
// (--max-sats and the daily limits, as over Nostr) and confirms it; it
// returns the quotation id the call names. A payment the client will not
// make is a contextvm.CodePaymentDeclined error, as over Nostr.
func (s *httpBuyer) buyQuotation(ctx context.Context, name string, args any) (string, error) {
	var q quotation.Quote
	if err := s.rpc(ctx, quotation.MethodQuote, map[string]any{"name": name, "arguments": args}, &q); err != nil {
		return "", remote(fmt.Errorf("nip10/quote for %s: %w", name, err))
	}
	offer := contextvm.PaymentOffer{Server: s.url, Method: "tools/call", Capability: "tool:" + name,
		Amount: q.Price.Amount, Unit: q.Price.Unit, PMI: q.Instructions.PMI, PayReq: q.Instructions.PayReq}
	po := s.pay
	declined := func(reason string, err error) error {
		if po != nil && po.Report != nil {
			po.Report(contextvm.PaymentReport{PaymentOffer: offer, Err: err})
		}
		data, _ := json.Marshal(contextvm.DeclinedData{Reason: reason, Amount: offer.Amount, Unit: offer.Unit, PMI: offer.PMI, Server: offer.Server})
		return &jsonrpc.Error{Code: contextvm.CodePaymentDeclined, Message: fmt.Sprintf("%s costs %d %s and was not paid: %v", offer.Capability, offer.Amount, offer.Unit, err), Data: data}
	}
	switch {
	case po == nil:
		return "", declined(contextvm.DeclinedNoPayments, errors.New("this client makes no payments"))
	case po.Budget == nil:
		return "", declined(contextvm.DeclinedNoCap, payments.ErrNoCap)
	}
	if err := po.Budget.Check(offer.Server, offer.Amount, offer.Unit); err != nil {
		return "", declined(cep8.BudgetReason(err), err)
	}
	var h payments.Handler
	for _, c := range po.Handlers {
		if c.PMI() == offer.PMI {
			h = c
		}
	}
	if h == nil {
		return "", declined(contextvm.DeclinedNoHandler, fmt.Errorf("no wallet here pays %s", offer.PMI))
	}
	if po.Confirm != nil && !po.Confirm(ctx, offer) {
		return "", declined(contextvm.DeclinedByPerson, errors.New("payment not approved"))
	}
	if err := po.Budget.Reserve(ctx, offer.Server, offer.Amount, offer.Unit); err != nil {
		return "", declined(cep8.BudgetReason(err), err)
	}
	receipt, err := h.Pay(ctx, payments.PaymentRequired{Amount: offer.Amount, PayReq: offer.PayReq, PMI: offer.PMI}, offer.Amount)
	if err != nil {
		if rerr := po.Budget.Refund(context.WithoutCancel(ctx), offer.Server, offer.Amount); rerr != nil {
			s.a.log.Warn("could not give back an unspent budget reservation", "err", rerr)
		}
		return "", declined(contextvm.DeclinedWallet, err)
	}
	if po.Report != nil {
		po.Report(contextvm.PaymentReport{PaymentOffer: offer, Paid: true, Receipt: receipt})
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := s.rpc(ctx, quotation.MethodConfirm, map[string]any{"quotation_id": q.ID, "payment_proof": receipt.Preimage}, &st); err != nil {
		if po.Report != nil {
			po.Report(contextvm.PaymentReport{PaymentOffer: offer, Rejected: true, Message: err.Error()})
		}
		return "", remote(fmt.Errorf("paid %d %s for %s, but the server did not confirm the payment (quotation %s): %w", offer.Amount, offer.Unit, name, q.ID, err))
	}
	if po.Report != nil {
		po.Report(contextvm.PaymentReport{PaymentOffer: offer, Accepted: true})
	}
	return q.ID, nil
}

// isQuotationRequired reports a priced call refused for want of a
// quotation.
func isQuotationRequired(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == quotation.CodeQuotationRequired
}

// payOverHTTP buys the quotation of a call and names it in its _meta.
func (s *oneShot) payOverHTTP(ctx context.Context, params *mcp.CallToolParams) error {
	id, err := s.buyer.buyQuotation(ctx, params.Name, params.Arguments)
	if derr, ok := declinedError(err, s.buyer.pay); ok {
		return derr
	}
	if err != nil {
		return err
	}
	if params.Meta == nil {
		params.Meta = mcp.Meta{}
	}
	params.Meta[quotation.MetaQuotation] = id
	return nil
}

// toolPrices are the prices of tools by name: over Nostr the cap tags of
// the tools/list answer, over HTTP each tool's _meta["nip10/price"].
func (s *oneShot) toolPrices(tools []*mcp.Tool) map[string]*discovery.Price {
	if s.httpURL == "" {
		return toolPrices(s.transport.Prices())
	}
	var prices []contextvm.Price
	for _, t := range tools {
		if !pricedOverHTTP(t) {
			continue
		}
		p := contextvm.Price{Capability: "tool:" + t.Name, Amount: "?"}
		var v struct {
			Amount int64  `json:"amount"`
			Max    int64  `json:"max"`
			Unit   string `json:"unit"`
		}
		if b, err := json.Marshal(t.Meta[quotation.MetaPrice]); err == nil && json.Unmarshal(b, &v) == nil {
			p.Amount, p.Unit = strconv.FormatInt(v.Amount, 10), v.Unit
			if v.Max > v.Amount {
				p.Amount += "-" + strconv.FormatInt(v.Max, 10)
			}
		}
		prices = append(prices, p)
	}
	return toolPrices(prices)
}
