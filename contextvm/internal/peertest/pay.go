package peertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PayFixture is a relay, a ledger and a server charging 10 sats for its
// count tool, paid to "srv" in the ledger; Calls counts the tool's runs.
type PayFixture struct {
	Relay  *relay.Server
	Ledger *payments.Ledger
	Calls  atomic.Int64
}

// NewPayFixture is a fixture where alice holds alice sats.
func NewPayFixture(t *testing.T, alice int64) *PayFixture {
	return &PayFixture{
		Relay:  relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}}),
		Ledger: payments.NewLedger(map[string]int64{"alice": alice}),
	}
}

// ServerOptions are those of a server on the fixture's relay, without
// encryption, that charges prices (tool:count=10 when none) through a
// fake processor whose payment requests live for ttl (0: its default).
func (f *PayFixture) ServerOptions(ttl time.Duration, prices ...string) contextvm.ServerOptions {
	if len(prices) == 0 {
		prices = []string{"tool:count=10"}
	}
	var ps []contextvm.Price
	for _, s := range prices {
		p, err := contextvm.ParsePrice(s)
		if err != nil {
			panic(err)
		}
		ps = append(ps, p)
	}
	return contextvm.ServerOptions{Relays: []string{f.Relay.URL}, Encryption: contextvm.EncryptDisabled, Prices: ps,
		Gate: cep8.NewGate(f.GateOptions(ttl))}
}

// GateOptions are the gate options of ServerOptions: a fake processor
// paying "srv", whose payment requests live for ttl (0: its default).
func (f *PayFixture) GateOptions(ttl time.Duration) cep8.Options {
	return cep8.Options{Processors: []payments.Processor{&payments.FakeProcessor{Ledger: f.Ledger, Payee: "srv", TTL: ttl}}}
}

// Balances are alice's and the server's.
func (f *PayFixture) Balances(t *testing.T) (alice, srv int64) {
	t.Helper()
	alice, _ = f.Ledger.Balance(context.Background(), "alice")
	srv, _ = f.Ledger.Balance(context.Background(), "srv")
	return alice, srv
}

// Client connects to srv through the fixture's relay, paying with pay.
func (f *PayFixture) Client(t *testing.T, srv *contextvm.Server, pay *cep8.PayOptions) *mcp.ClientSession {
	return Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{f.Relay.URL},
		Encryption: contextvm.EncryptDisabled, RequestTimeout: testwait.Timeout(20 * time.Second), Payer: pay.Payer()})
}
