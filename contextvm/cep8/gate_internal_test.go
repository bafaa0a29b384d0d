package cep8

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// BenchmarkGateCPU is the gate's own work for one paid request, without
// the network: the price lookup and pricing, issuing and verifying a Fake
// payment (paid in between, as the client would), the charge and result
// records in the durable store, and the explicit-gating grant key.
func BenchmarkGateCPU(b *testing.B) {
	ctx := context.Background()
	ledger := payments.NewLedger(map[string]int64{"alice": 1 << 50})
	proc := &payments.FakeProcessor{Ledger: ledger, Payee: "srv"}
	h := &payments.FakeHandler{Ledger: ledger, Payer: "alice"}
	p, _ := contextvm.ParsePrice("tool:count=10")
	g := NewGate(Options{Processors: []payments.Processor{proc}})
	if err := g.init([]contextvm.Price{p}, durable.NewMemory(durable.Options{}), contextvm.DefaultFreshness, slog.New(slog.DiscardHandler)); err != nil {
		b.Fatal(err)
	}
	client := nostr.Generate().Public()
	m := &jsonrpc.Request{Method: "tools/call", Params: json.RawMessage(`{"name":"count","arguments":{"a":1}}`)}
	result := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"1"}]}}`
	var n int
	for b.Loop() {
		n++
		price, ok := g.priced(m)
		if !ok {
			b.Fatal("not priced")
		}
		id := nostr.ID{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)}
		charge := payments.Charge{Unit: price.Unit, RequestID: id.Hex(), Client: client.Hex()}
		q, err := payments.Resolve(ctx, nil, payments.PriceRequest{Cap: price, Method: m.Method, Params: m.Params})
		if err != nil {
			b.Fatal(err)
		}
		charge.Amount = q.Amount
		req, err := proc.Require(ctx, charge)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Pay(ctx, req, 10); err != nil {
			b.Fatal(err)
		}
		if err := proc.Verify(ctx, charge, req); err != nil {
			b.Fatal(err)
		}
		created := nostr.Now()
		g.charged(ctx, id.Hex(), jsonrpc.ID{}, created, charge, req.PMI)
		g.stored(ctx, id.Hex(), created, result)
		if _, err := grantKey(client, m); err != nil {
			b.Fatal(err)
		}
	}
}

// The wait for a payment outlasts its request's TTL by a second: the TTL
// is whole seconds, rounded down for an invoice made ahead, and the
// processor, not the wait's deadline, is the one to say the invoice
// expired (payments/lightning TestVerifyExpiresAtTheDeadline).
func TestVerifyTimeout_ASecondPastTheTTL(t *testing.T) {
	g := NewGate(Options{VerifyTimeout: 5 * time.Minute})
	for _, c := range []struct {
		ttl  int64
		want time.Duration
	}{{0, 5 * time.Minute}, {1, 2 * time.Second}, {299, 5 * time.Minute}, {3600, 5 * time.Minute}} {
		if got := g.verifyTimeout(payments.PaymentRequired{TTL: c.ttl}); got != c.want {
			t.Errorf("ttl %d s: the wait is %s, want %s", c.ttl, got, c.want)
		}
	}
}
