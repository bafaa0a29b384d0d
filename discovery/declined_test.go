package discovery_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// declineFixture is a relay with Dear, trusted, asking 9 sats for
// translate before it runs (CEP-8, the fake payment method), and an
// untrusted provider, other, announcing price and not gating; and the
// schema's hash, and an empty history.
func declineFixture(t *testing.T, other, price string) (p *nostrx.Pool, hash string, hist *discovery.History, dear, second *contextvm.Server) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	p = pool(t, r)
	gate := cep8.NewGate(cep8.Options{Processors: []payments.Processor{&payments.FakeProcessor{Ledger: payments.NewLedger(nil), Payee: "Dear"}}})
	dear = startProviderGated(t, r, "Dear", "9", nostr.Generate(), gate)
	second = startProvider(t, r, other, price)
	return p, schemaHash(t, p, 2), discovery.OpenHistory(filepath.Join(t.TempDir(), "history.json")), dear, second
}

// callWithin calls translate on the providers of hash, trusting trusted
// first, paying at most maxSats a call.
func callWithin(t *testing.T, p *nostrx.Pool, hash string, hist *discovery.History, trusted nostr.PubKey, maxSats int64) (*discovery.CallResult, error) {
	t.Helper()
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	pay := &cep8.PayOptions{Budget: &payments.Budget{PerCall: maxSats}}
	return discovery.Call(ctx, discovery.CallOptions{
		SchemaHash: hash, Tool: "translate", Arguments: translateIn{Text: "hi", To: "fr"},
		Pool: p, History: hist, AttemptTimeout: 10 * time.Second,
		Policy: discovery.TrustedFirst, Trusted: map[nostr.PubKey]bool{trusted: true},
		Client: contextvm.ClientOptions{Signer: contextvm.NewKeySigner(nostr.Generate()), Payer: pay.Payer()},
	})
}

// A payment the caller declines (over its cap) is not the provider's
// failure: it is not recorded in the history, and the call does not fail
// over to a provider as dear, which would be declined too, or answer
// unpaid only because it asks nothing of a caller it does not gate.
func TestCallStopsAtADeclinedPayment(t *testing.T) {
	p, hash, hist, dear, same := declineFixture(t, "Same", "9")

	res, err := callWithin(t, p, hash, hist, dear.PublicKey(), 5)
	d, ok := contextvm.Declined(err)
	if !ok || d.Reason != contextvm.DeclinedOverCap || d.Amount != 9 {
		t.Fatalf("err %v; want the payment of 9 sats declined over the cap", err)
	}
	if len(res.Attempts) != 1 || res.Attempts[0].Provider.Server.Name != "Dear" {
		t.Fatalf("attempts %+v; want Dear's alone", res.Attempts)
	}
	for name, pk := range map[string]nostr.PubKey{"Dear": dear.PublicKey(), "Same": same.PublicKey()} {
		if rec := hist.Get(pk); len(rec.Calls) != 0 {
			t.Errorf("%s's record %+v; want nothing recorded", name, rec)
		}
	}
}

// After a payment declined for its amount, the providers that announce a
// lower price are tried, and the one that answers is recorded; the
// declined one is not.
func TestCallFailsOverToACheaperProviderAfterADecline(t *testing.T) {
	p, hash, hist, dear, cheap := declineFixture(t, "Cheap", "3")

	res, err := callWithin(t, p, hash, hist, dear.PublicKey(), 5)
	if err != nil || res.Provider.Server.Name != "Cheap" || res.Result.Content[0].(*mcp.TextContent).Text != "Cheap: hi" {
		t.Fatalf("call: %+v, %v; want Cheap's answer", res, err)
	}
	if len(res.Attempts) != 2 || res.Attempts[0].Provider.Server.Name != "Dear" {
		t.Fatalf("attempts %+v; want Dear's, then Cheap's", res.Attempts)
	}
	if _, ok := contextvm.Declined(res.Attempts[0].Err); !ok {
		t.Fatalf("Dear's attempt: %v; want its payment declined", res.Attempts[0].Err)
	}
	if rec := hist.Get(dear.PublicKey()); len(rec.Calls) != 0 {
		t.Errorf("Dear's record %+v; want nothing recorded", rec)
	}
	if rec := hist.Get(cheap.PublicKey()); len(rec.Calls) != 1 || !rec.Calls[0].OK {
		t.Errorf("Cheap's record %+v; want its success", rec)
	}
}

// History.Record, which the calls relayed through a connection and cvm
// call use, records a declined payment as nothing, and a payment request
// the client could not read as the server's failure.
func TestHistory_RecordsNoDeclinedPayment(t *testing.T) {
	h := discovery.OpenHistory(filepath.Join(t.TempDir(), "history.json"))
	declined := func(reason string) error {
		data, _ := json.Marshal(contextvm.DeclinedData{Reason: reason, Amount: 9, Unit: "sats"})
		return &jsonrpc.Error{Code: contextvm.CodePaymentDeclined, Message: "not paid", Data: data}
	}
	pk := nostr.Generate().Public()
	for _, reason := range []string{contextvm.DeclinedOverCap, contextvm.DeclinedByPerson, contextvm.DeclinedWallet} {
		h.Record(pk, time.Millisecond, declined(reason), time.Now())
	}
	if rec := h.Get(pk); len(rec.Calls) != 0 {
		t.Fatalf("after declined payments: %+v; want nothing recorded", rec)
	}
	h.Record(pk, time.Millisecond, declined(contextvm.DeclinedMalformed), time.Now())
	if rec := h.Get(pk); len(rec.Calls) != 1 || rec.Calls[0].OK {
		t.Fatalf("after a malformed payment request: %+v; want one failure", rec)
	}
}
