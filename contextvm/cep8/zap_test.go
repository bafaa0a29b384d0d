package cep8_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/zap"
	"github.com/cvmgo/cvm/payments/zap/zapsim"
)

// A zap asked for before a restart and paid while the server was down is
// credited when the same request event is replayed after the restart: the
// pending zap is in the server's durable store, and the restarted server
// reads the receipt the address published meanwhile (subscribing from the
// zap request's time); the tool runs once and exactly the price moved.
func TestPayRestart_ZapPaidWhileDownCreditedOnReplay(t *testing.T) {
	f := peertest.NewPayFixture(t, 0)
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	net.AddWallet("srv", 0)
	net.AddWallet("alice", 100_000)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	sim, err := zapsim.Start(zapsim.Options{Network: net, Zappers: map[string]nostr.SecretKey{"srv": nostr.Generate()}, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	addr, err := zap.ParseAddress(sim.Address("srv"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{outboundtest.EnvAllow: addr.Host, outboundtest.EnvCA: ca}
	fopts, err := outboundtest.FromEnv(outbound.Options{}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	dir, sk := t.TempDir(), nostr.Generate()
	var srv *contextvm.Server
	start := func() (stop func()) {
		state, err := durable.Open(dir, sk.Public().Hex(), durable.Options{})
		if err != nil {
			t.Fatal(err)
		}
		proc, err := zap.NewProcessor(zap.Options{Address: addr, Key: sk, Relays: []string{f.Relay.URL}, Store: state, Fetcher: outbound.New(fopts)})
		if err != nil {
			t.Fatal(err)
		}
		opts := f.ServerOptions(0)
		opts.Signer, opts.State, opts.Encryption = contextvm.NewKeySigner(sk), state, contextvm.EncryptOptional
		opts.Gate = cep8.NewGate(cep8.Options{Processors: []payments.Processor{proc}})
		srv = peertest.Serve(t, opts, peertest.CounterServer(&f.Calls))
		return func() { srv.Close(); proc.Close(); state.Close() }
	}
	stop := start()
	peer, req, pr := askedToPay(t, f.Relay.URL, srv)
	stop()
	drainUntil(t, peer, func(m map[string]json.RawMessage) bool { return strings.Contains(string(m["error"]), "shutting down") })
	if _, err := net.Pay("alice", pr.PayReq); err != nil { // its receipt goes to the relay while no server runs
		t.Fatal(err)
	}

	defer start()()
	peer.Publish(req)
	var result json.RawMessage
	for result == nil {
		_, m := peertest.NextMessage(t, peer)
		switch peertest.Method(m) {
		case contextvm.MethodPaymentRequired, contextvm.MethodPaymentAccepted:
		case "":
			if m["error"] != nil {
				t.Fatalf("replay after restart answered %s", m["error"])
			}
			result = m["result"]
		default:
			t.Fatalf("unexpected %v", m)
		}
	}
	if b, _ := net.Balance("srv"); !strings.Contains(string(result), `"text":"1"`) || f.Calls.Load() != 1 || b != 10_000 {
		t.Fatalf("result %s, %d runs, srv holds %d msat; want 1 run and 10000", result, f.Calls.Load(), b)
	}
}
