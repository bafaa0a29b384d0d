package zap_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/zap"
	"github.com/cvmgo/cvm/payments/zap/zapsim"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// fixture is a relay, a simulated network with wallets srv (the
// address's) and alice (the payer's), srv's Lightning address served by
// zapsim, and a fetcher that trusts it.
type fixture struct {
	relayURL string
	net      *lnsim.Network
	addr     zap.Address
	fetcher  *outbound.Fetcher
	zapper   nostr.SecretKey // signs srv's receipts
	key      nostr.SecretKey // the server's
	store    durable.Store
	log      *waitbuf.Buffer
	made     int // zap requests made by zapRequest
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, msat := range map[string]int64{"srv": 0, "alice": 100_000} {
		if _, err := net.AddWallet(name, msat); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{relayURL: r.URL, net: net, zapper: nostr.Generate(), key: nostr.Generate(),
		store: durable.NewMemory(durable.Options{}), log: &waitbuf.Buffer{}}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	sim, err := zapsim.Start(zapsim.Options{Network: net, Zappers: map[string]nostr.SecretKey{"srv": f.zapper}, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	if f.addr, err = zap.ParseAddress(sim.Address("srv")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{outboundtest.EnvAllow: f.addr.Host, outboundtest.EnvCA: ca}
	opts, err := outboundtest.FromEnv(outbound.Options{}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	f.fetcher = outbound.New(opts)
	return f
}

// processor is a processor of the fixture's address, closed with the
// test.
func (f *fixture) processor(t *testing.T) *zap.Processor {
	t.Helper()
	p, err := zap.NewProcessor(zap.Options{Address: f.addr, Key: f.key, Relays: []string{f.relayURL}, Store: f.store,
		Fetcher: f.fetcher, Logger: f.log.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func (f *fixture) require(t *testing.T, p *zap.Processor, sats int64) payments.PaymentRequired {
	t.Helper()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	req, err := p.Require(ctx, payments.Charge{Amount: sats, Unit: "sats", Description: "tool:add", RequestID: "r", Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// verifying runs p.Verify of req until the test ends; its result arrives
// on the channel.
func verifying(t *testing.T, p *zap.Processor, req payments.PaymentRequired) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	done, exited := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(exited)
		done <- p.Verify(ctx, payments.Charge{Amount: req.Amount}, req)
	}()
	t.Cleanup(func() { cancel(); <-exited })
	return done
}

func (f *fixture) balance(t *testing.T, wallet string) int64 {
	t.Helper()
	b, err := f.net.Balance(wallet)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publish signs evt with sk and publishes it to the fixture's relay.
func (f *fixture) publish(t *testing.T, evt nostr.Event, sk nostr.SecretKey) nostr.Event {
	t.Helper()
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{f.relayURL}})
	defer pool.Close()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if err := pool.Publish(ctx, evt); err != nil {
		t.Fatal(err)
	}
	return evt
}

// zapRequest is a zap request for msat to the fixture's zapper, signed
// by sk, and its JSON.
func (f *fixture) zapRequest(t *testing.T, msat int64, sk nostr.SecretKey) (zap.Request, string) {
	t.Helper()
	// Apart from each other and from the processor's own by a relay
	// of their own: the same content in the same second would be the
	// same event.
	f.made++
	evt := zap.NewRequest(msat, f.zapper.Public(), []string{f.relayURL, fmt.Sprintf("ws://127.0.0.1:%d", f.made)}, nostr.Now())
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(evt)
	zr, err := zap.ParseRequest(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return zr, string(b)
}

// invoice is an invoice of srv for msat bound to description's hash,
// made on the network directly.
func (f *fixture) invoice(t *testing.T, msat int64, description string) string {
	t.Helper()
	inv, err := f.net.MakeInvoiceHashed("srv", msat, sha256.Sum256([]byte(description)), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return inv.Bolt11
}

// zapRequestOf is the zap request a payment request carries in _meta.
func zapRequestOf(t *testing.T, req payments.PaymentRequired) string {
	t.Helper()
	var m struct {
		Rail       string `json:"rail"`
		ZapRequest string `json:"zap_request"`
	}
	if err := json.Unmarshal(req.Meta, &m); err != nil || m.Rail != zap.Rail || m.ZapRequest == "" {
		t.Fatalf("_meta of the payment request: %s (%v)", req.Meta, err)
	}
	return m.ZapRequest
}

// count is how many times s was logged.
func count(b *waitbuf.Buffer, s string) int { return strings.Count(b.String(), s) }
