package cep8

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// boltProcessor is a Fake processor under Lightning's pmi: the gate
// offers channels only with Lightning first, and a receipt never reaches
// the processor.
type boltProcessor struct{ *payments.FakeProcessor }

func (boltProcessor) PMI() string { return payments.PMILightningBolt11 }

// BenchmarkChannelReceipt is the gate's work for one call paid by a
// channel receipt, beyond the request event's signature (checked before
// the gate sees it) and the MCP handler: what byChannel and byReceipt do
// (the price lookup and pricing, the receipt read off the event's tags,
// the checks, the charge recorded, the books' check and durable Put of
// the receipt, the channel's next state marshalled into the result's
// _meta), and the paid result kept for replays after the call. The store
// is on disk, the log lines are formatted, as in cvm gateway.
func BenchmarkChannelReceipt(b *testing.B) {
	ctx := context.Background()
	store, err := durable.Open(b.TempDir(), "state", durable.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	server, client := nostr.Generate().Public(), nostr.Generate().Public()
	books, err := channel.New(channel.Options{Store: store, ServerKey: server[:], Log: log})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := contextvm.ParsePrice("tool:count=1")
	g := NewGate(Options{Processors: []payments.Processor{boltProcessor{&payments.FakeProcessor{}}}, Channels: books})
	if err := g.init([]contextvm.Price{p}, store, contextvm.DefaultFreshness, log); err != nil {
		b.Fatal(err)
	}
	st, err := books.Open(ctx, channel.Funding{PaymentHash: [32]byte{1}, AmountMsat: 1 << 62, Client: client[:], Fragment: channel.FragmentNostr})
	if err != nil {
		b.Fatal(err)
	}
	payer := channel.NewClient(st)
	m := &jsonrpc.Request{Method: "tools/call", Params: json.RawMessage(`{"name":"count","arguments":{"a":1}}`)}
	result := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"1"}]}}`
	var n int
	for b.Loop() {
		b.StopTimer()
		n++
		r, err := payer.Pay(1000)
		if err != nil {
			b.Fatal(err)
		}
		tag, _ := channel.Tag(r)
		tags := nostr.Tags{{"p", server.Hex()}, tag}
		id := nostr.ID{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)}
		key, created := id.Hex(), nostr.Now()
		b.StartTimer()

		price, ok := g.priced(m)
		if !ok {
			b.Fatal("not priced")
		}
		charge := payments.Charge{Unit: price.Unit, Description: price.Capability, RequestID: key, Client: client.Hex()}
		q, err := payments.Resolve(ctx, g.opts.Pricer, payments.PriceRequest{Cap: price, Method: m.Method, Params: m.Params, Client: charge.Client, RequestID: key})
		if err != nil {
			b.Fatal(err)
		}
		charge.Amount = q.Amount
		got, has, err := channel.FromTags(tags)
		if !has || err != nil || findTag(tags, TagChannelOpen) != nil || findTag(tags, TagChannelTopUp) != nil || charge.Unit != contextvm.DefaultPriceUnit {
			b.Fatalf("receipt %v %v", has, err)
		}
		g.charged(ctx, key, jsonrpc.ID{}, created, charge, channel.PMI)
		next, err := books.Accept(ctx, client[:], &got, uint64(charge.Amount)*1000, key)
		if err != nil {
			b.Fatal(err)
		}
		answer := next.Answer(uint64(charge.Amount) * 1000)
		if _, err := channel.MarshalPayload(&answer); err != nil {
			b.Fatal(err)
		}
		g.stored(ctx, key, created, result)
	}
}
