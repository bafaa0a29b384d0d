package contextvm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The seams are what a feature outside contextvm plugs into: these tests
// plug in features written here, against the exported API only, as
// contextvm/replica and contextvm/cep8 do.

// refusingCoordinator acts on every message but those of one tool, which
// it refuses without running, and counts the answers it is told of.
type refusingCoordinator struct {
	h        *contextvm.Host
	tool     string
	answered atomic.Int64
}

func (rc *refusingCoordinator) Join(_ context.Context, h *contextvm.Host) (durable.Store, error) {
	rc.h = h
	return durable.NewMemory(durable.Options{}), nil
}

func (rc *refusingCoordinator) Route(ctx context.Context, m *contextvm.Inbound) {
	if strings.Contains(m.Content(), `"name":"`+rc.tool+`"`) {
		m.Refuse(&jsonrpc.Error{Code: contextvm.CodeServerBusy, Message: "not on this replica"})
		return
	}
	m.Proceed(ctx, m.Claim(ctx))
}

func (rc *refusingCoordinator) Assembled(ctx context.Context, m *contextvm.Inbound) {
	m.Proceed(ctx, nil)
}

func (rc *refusingCoordinator) Session(_ context.Context, client nostr.PubKey) (*contextvm.ServerConn, *jsonrpc.Error) {
	return rc.h.StartSession(client, nil, nil)
}

func (rc *refusingCoordinator) Initialized(context.Context, nostr.PubKey, json.RawMessage, nostr.Tags) {
}

func (rc *refusingCoordinator) Answered(context.Context, nostr.ID, bool) { rc.answered.Add(1) }

func (rc *refusingCoordinator) Lead(ctx context.Context, f func(context.Context)) { f(ctx) }

// A Coordinator decides which messages the server acts on: one it refuses
// never reaches the MCP handler, and is answered; the others run, and the
// coordinator hears of each answer; its store is the server's State.
func TestCoordinator_DecidesWhatTheServerActsOn(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var calls atomic.Int64
	rc := &refusingCoordinator{tool: "count"}
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Replicas: rc}, peertest.CounterServer(&calls))
	if srv.Replicas() != rc || srv.State() == nil {
		t.Fatalf("server's coordinator %v, state %v; want the one given, and its store", srv.Replicas(), srv.State())
	}
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}})
	if got := peertest.CallEcho(t, cs, "hi"); got != "hi" {
		t.Fatalf("echo answered %q", got)
	}
	_, err := peertest.Call(cs, "count", nil)
	if peertest.RPCCode(err) != contextvm.CodeServerBusy || calls.Load() != 0 {
		t.Fatalf("refused call: %v, %d runs; want the coordinator's refusal and none", err, calls.Load())
	}
	// Told once the answer has gone out, which the client may see first.
	testwait.Eventually(t, 10*time.Second, "the coordinator to hear of every answer (initialize, echo, the refusal)",
		func() bool { return rc.answered.Load() >= 3 })
}

// quotaGate lets a client run the count tool once; it answers the next
// ones itself, and puts its tag on the session's discovery tags.
type quotaGate struct {
	mu   sync.Mutex
	used map[nostr.PubKey]bool
}

func (g *quotaGate) Attach(*contextvm.Host) error                      { return nil }
func (g *quotaGate) Tags() nostr.Tags                                  { return nostr.Tags{{"quota", "1"}} }
func (g *quotaGate) Session() contextvm.GateSession                    { return quotaSession{g} }
func (g *quotaGate) Answered(context.Context, *contextvm.Call, string) {}
func (g *quotaGate) Replayed(context.Context, nostr.Event, nostr.Kind) {}
func (g *quotaGate) Cancelled(string) bool                             { return false }
func (g *quotaGate) Adopt(context.Context, nostr.ID, nostr.PubKey, nostr.Kind) (*nostr.Event, bool) {
	return nil, false
}

type quotaSession struct{ g *quotaGate }

func (s quotaSession) Learn(nostr.Tags) {}
func (s quotaSession) Tags() nostr.Tags { return s.g.Tags() }
func (s quotaSession) Admit(call *contextvm.Call) bool {
	if name, _ := contextvm.PricedCapability(call.Request()); name != "tool:count" {
		return false
	}
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if !s.g.used[call.Client()] {
		s.g.used[call.Client()] = true
		call.Run()
		return true
	}
	call.Go(func(ctx context.Context) {
		call.Answer(ctx, &jsonrpc.Error{Code: contextvm.CodePriceRefused, Message: "quota used"})
	})
	return true
}

// A Gate is shown each request before the MCP handler: it runs one, and
// answers the next itself, which then never runs; what it does not take
// runs as usual; its tags go with the server's discovery tags.
func TestGate_TakesRequestsBeforeTheHandler(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	tp := newTap(t, r.URL)
	var calls atomic.Int64
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Gate: &quotaGate{used: map[nostr.PubKey]bool{}}}, peertest.CounterServer(&calls))
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled})
	if _, err := peertest.Call(cs, "count", nil); err != nil {
		t.Fatalf("first count: %v", err)
	}
	if _, err := peertest.Call(cs, "count", nil); peertest.RPCCode(err) != contextvm.CodePriceRefused {
		t.Fatalf("second count: %v; want the gate's answer", err)
	}
	if peertest.CallEcho(t, cs, "free") != "free" || calls.Load() != 1 {
		t.Fatalf("%d runs of count; want 1", calls.Load())
	}
	tagged := false
	for _, m := range tp.messages() {
		if m.evt.PubKey == srv.PublicKey() {
			if v, _ := peertest.FirstTag(m.evt.Tags, "quota"); v == "1" {
				tagged = true
			}
		}
	}
	if !tagged {
		t.Fatal("the gate's tag was never among the server's discovery tags")
	}
}

// tokenPayer pays nothing, and puts a token on every request it sends:
// where a prepaid channel or a Cashu token travels with a request.
type tokenPayer struct{}

func (tokenPayer) Tags(call *contextvm.PaidCall, discovery bool) nostr.Tags {
	if call.Request().Method != "tools/call" {
		return nil
	}
	return nostr.Tags{{"token", map[bool]string{true: "first", false: "next"}[discovery]}}
}

func (tokenPayer) Pay(_ context.Context, call *contextvm.PaidCall, offer contextvm.PaymentOffer, _ payments.PaymentRequired) error {
	return call.Decline(offer, contextvm.DeclinedNoHandler, errors.New("no wallet here"))
}
func (tokenPayer) Report(contextvm.PaymentReport)                       {}
func (tokenPayer) Answered(*contextvm.PaidCall, *jsonrpc.Response) bool { return false }

// A Payer's tags go on each request as it is sent: with the discovery
// tags on a stateless client's first request, alone on the next.
func TestPayer_TagsGoOnEachRequest(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	tp := newTap(t, r.URL)
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled}, peertest.EchoServer())
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Stateless: true, Payer: tokenPayer{}})
	for range 2 {
		peertest.CallEcho(t, cs, "hi")
	}
	var tokens []string
	peertest.Await(t, "both calls seen", &tp.changes, func() bool {
		tokens = tokens[:0]
		for _, m := range tp.messages() {
			if m.method == "tools/call" && m.call {
				v, _ := peertest.FirstTag(m.evt.Tags, "token")
				tokens = append(tokens, v)
			}
		}
		return len(tokens) == 2
	})
	if tokens[0] != "first" || tokens[1] != "next" {
		t.Fatalf("tokens %q; want the payer's, first with the discovery tags", tokens)
	}
}

// metaGate puts its word in the _meta of each count result, and answers
// its own method, meta/status, with a result of its own.
type metaGate struct{ quotaGate }

func (g *metaGate) Tags() nostr.Tags               { return nostr.Tags{{contextvm.TagPMI, "test-pmi"}} }
func (g *metaGate) Session() contextvm.GateSession { return metaSession{g} }

type metaSession struct{ g *metaGate }

func (s metaSession) Learn(nostr.Tags) {}
func (s metaSession) Tags() nostr.Tags { return s.g.Tags() }
func (s metaSession) Admit(call *contextvm.Call) bool {
	switch call.Request().Method {
	case "meta/status":
		call.Go(func(ctx context.Context) { call.Reply(ctx, json.RawMessage(`{"left":0}`)) })
		return true
	case "tools/call":
		call.SetMeta("test/left", json.RawMessage(`1`))
		call.Run()
		return true
	}
	return false
}

// metaPayer notes the server's pmi tags as each call goes, and the _meta
// of each result it is shown.
type metaPayer struct {
	tokenPayer
	mu    sync.Mutex
	pmis  [][]string
	metas []string
}

func (p *metaPayer) Tags(call *contextvm.PaidCall, _ bool) nostr.Tags {
	if call.Request().Method == "tools/call" {
		p.mu.Lock()
		p.pmis = append(p.pmis, call.ServerPMIs())
		p.mu.Unlock()
	}
	return nil
}

func (p *metaPayer) Answered(_ *contextvm.PaidCall, resp *jsonrpc.Response) bool {
	var res struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if resp.Error == nil && json.Unmarshal(resp.Result, &res) == nil && res.Meta != nil {
		p.mu.Lock()
		p.metas = append(p.metas, string(res.Meta))
		p.mu.Unlock()
	}
	return resp.Error == nil // a result is never taken, whatever this says
}

// A Gate may put its word in the _meta of a result it let run
// (Call.SetMeta) and answer a method of its own with a result (Call.Reply);
// a Payer sees the server's pmi tags as it tags a call, and every result.
func TestGate_SetsMetaAndReplies(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var calls atomic.Int64
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled,
		Gate: &metaGate{}}, peertest.CounterServer(&calls))
	mp := &metaPayer{}
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Payer: mp})
	res, err := peertest.Call(cs, "count", nil)
	if err != nil || calls.Load() != 1 {
		t.Fatalf("count: %v, %d runs", err, calls.Load())
	}
	if v, ok := res.Meta["test/left"]; !ok || v != float64(1) {
		t.Fatalf("result _meta %v; want the gate's test/left", res.Meta)
	}
	mp.mu.Lock()
	pmis, metas := mp.pmis, mp.metas
	mp.mu.Unlock()
	if len(pmis) != 1 || len(pmis[0]) != 1 || pmis[0][0] != "test-pmi" || len(metas) != 1 || !strings.Contains(metas[0], `"test/left":1`) {
		t.Fatalf("the payer saw pmis %q and metas %q", pmis, metas)
	}
	peer := peertest.NewRawPeer(t, r.URL)
	peer.Initialize(srv.PublicKey())
	peer.Publish(peer.Message(srv.PublicKey(), `{"jsonrpc":"2.0","id":9,"method":"meta/status"}`))
	_, m := peertest.NextMessage(t, peer)
	if string(m["result"]) != `{"left":0}` {
		t.Fatalf("meta/status answered %v", m)
	}
}
