package replica_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/contextvm/replica"
	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replicaOpts connects to NATS for one replica, closed after the test.
func replicaOpts(t *testing.T, url, member string) replica.Options {
	t.Helper()
	conn, err := natsx.Connect(t.Context(), url, natsx.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return replica.Options{Conn: conn, Member: member, Timeout: replicaTimeout}
}

// status is the view of srv's replica group; false for a server that is
// no replica.
func status(srv *contextvm.Server) (replica.Status, bool) {
	g, ok := srv.Replicas().(*replica.Group)
	if !ok {
		return replica.Status{}, false
	}
	return g.Status(), true
}

// membershipTimeout is the membership timeout of the test groups: long
// enough that a replica stalled by a loaded machine (both cores busy with
// -race) is not taken for dead, which CI saw at one second. replicaTimeout
// is it scaled (testwait): a slower machine gives its replicas longer, and
// the failover bounds derived from it grow with it.
const membershipTimeout = 2 * time.Second

var replicaTimeout = testwait.Timeout(membershipTimeout)

// awaitGroup waits until every server sees n members and is ready.
func awaitGroup(t testing.TB, n int, srvs ...*contextvm.Server) {
	t.Helper()
	for _, s := range srvs {
		if _, ok := status(s); !ok {
			t.Fatal("no group")
		}
		var st replica.Status
		if !testwait.Until(t.Context(), 10*time.Second, func() bool {
			st, _ = status(s)
			return st.Ready && len(st.Members) == n
		}) {
			t.Fatalf("group view %+v; want %d members", st, n)
		}
	}
}

// Three replicas with one key collect a price: every replica sees each
// paid request, one charges it and runs it, once.
func TestReplicas_PaidRequestChargedOnce(t *testing.T) {
	ns := natstest.Start(t)
	f := peertest.NewPayFixture(t, 100)
	signer := contextvm.NewKeySigner(nostr.Generate())
	var srvs []*contextvm.Server
	for _, m := range []string{"a", "b", "c"} {
		opts := f.ServerOptions(0)
		opts.Signer = signer
		opts.Replicas = replica.New(replicaOpts(t, ns.URL(), m))
		srvs = append(srvs, peertest.Serve(t, opts, peertest.CounterServer(&f.Calls)))
	}
	awaitGroup(t, 3, srvs...)
	cs := f.Client(t, srvs[0], &cep8.PayOptions{
		Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.Ledger, Payer: "alice"}},
		Budget:   &payments.Budget{PerCall: 10},
	})
	for i := range 3 {
		if _, err := peertest.Call(cs, "count", nil); err != nil {
			t.Fatalf("paid call %d: %v", i, err)
		}
	}
	if a, s := f.Balances(t); a != 70 || s != 30 || f.Calls.Load() != 3 {
		t.Fatalf("balances alice %d srv %d, %d executions; want 70, 30 and 3", a, s, f.Calls.Load())
	}
	var won, skipped int64
	for _, s := range srvs {
		st, _ := status(s)
		won += st.ClaimsWon
		skipped += st.Skipped
	}
	if skipped == 0 {
		t.Fatalf("no replica passed a request to another: %d won, %d skipped", won, skipped)
	}
}

// Two groups with different keys on one NATS do not see each other: each
// is its own membership, store and claims.
func TestReplicas_TwoGroupsOnOneNATSDoNotInterfere(t *testing.T) {
	ns := natstest.Start(t)
	f := peertest.NewPayFixture(t, 0)
	var callsA, callsB atomic.Int64
	keyA, keyB := contextvm.NewKeySigner(nostr.Generate()), contextvm.NewKeySigner(nostr.Generate())
	group := func(signer contextvm.Signer, calls *atomic.Int64, members ...string) []*contextvm.Server {
		var out []*contextvm.Server
		for _, m := range members {
			out = append(out, peertest.Serve(t, contextvm.ServerOptions{Signer: signer, Relays: []string{f.Relay.URL},
				Replicas: replica.New(replicaOpts(t, ns.URL(), m))}, peertest.CounterServer(calls)))
		}
		return out
	}
	a := group(keyA, &callsA, "x", "y")
	b := group(keyB, &callsB, "x") // same member name, other key
	awaitGroup(t, 2, a...)
	awaitGroup(t, 1, b...)
	for _, s := range []*contextvm.Server{a[0], b[0]} {
		cs := peertest.Connect(t, contextvm.ClientOptions{Server: s.PublicKey().Hex(), Relays: []string{f.Relay.URL}, RequestTimeout: testwait.Timeout(20 * time.Second)})
		for range 4 {
			if _, err := peertest.Call(cs, "count", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if callsA.Load() != 4 || callsB.Load() != 4 {
		t.Fatalf("executions: group A %d, group B %d; want 4 each", callsA.Load(), callsB.Load())
	}
	if st, _ := status(b[0]); len(st.Members) != 1 || st.ClaimsWon != 6 { // initialize, initialized, 4 calls
		t.Fatalf("group B view %+v", st)
	}
}

// natsLost stops NATS and waits until srv has seen it go.
func natsLost(t *testing.T, ns *natstest.Server, srv *contextvm.Server) {
	t.Helper()
	ns.Stop()
	testwait.Eventually(t, 10*time.Second, "the replica to see NATS go", func() bool {
		st, _ := status(srv)
		return !st.Ready
	})
}

// callHeld starts a call and waits until srv holds it (its n-th held
// request); the call's error comes on the channel.
func callHeld(t *testing.T, cs *mcp.ClientSession, srv *contextvm.Server, n int64) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() {
		_, err := peertest.Call(cs, "count", nil)
		res <- err
	}()
	var st replica.Status
	if !testwait.Until(t.Context(), 10*time.Second, func() bool {
		st, _ = status(srv)
		return st.Held >= n
	}) {
		t.Fatalf("the call was not held: %+v", st)
	}
	return res
}

// A replica that loses NATS holds its clients' calls: it neither runs nor
// refuses them, since it cannot know whether another replica will. Once
// NATS is back, a call held for less than twice the membership timeout is
// claimed and run, once, and answered. Before, it was answered -32018 at
// once, which was false when another replica ran it.
func TestReplicas_NATSLostThenBack(t *testing.T) {
	ns := natstest.Start(t)
	f := peertest.NewPayFixture(t, 0)
	// A long timeout: the call must be back well within twice it, even
	// when NATS is slow to restart on a loaded machine.
	opts := replicaOpts(t, ns.URL(), "solo")
	opts.Timeout = testwait.Timeout(5 * time.Second)
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{f.Relay.URL}, Replicas: replica.New(opts)}, peertest.CounterServer(&f.Calls))
	awaitGroup(t, 1, srv)
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{f.Relay.URL}, RequestTimeout: testwait.Timeout(20 * time.Second)})
	if _, err := peertest.Call(cs, "count", nil); err != nil {
		t.Fatal(err)
	}
	natsLost(t, ns, srv)
	res := callHeld(t, cs, srv, 1)
	if n := f.Calls.Load(); n != 1 {
		t.Fatalf("%d executions without NATS; want none", n-1)
	}
	ns.Restart()
	if err := <-res; err != nil {
		t.Fatalf("call held while NATS was down: %v", err)
	}
	if _, err := peertest.Call(cs, "count", nil); err != nil {
		t.Fatalf("call after NATS came back: %v", err)
	}
	if n := f.Calls.Load(); n != 3 {
		t.Fatalf("%d executions; want 3", n)
	}
	if st, _ := status(srv); st.Refused != 0 || st.Holding != 0 {
		t.Fatalf("group %+v; want nothing refused or held", st)
	}
}

// A call held for longer than twice the membership timeout does not run
// when NATS comes back: it is claimed, so no replica can run it, and
// answered -32018, which is then true.
func TestReplicas_HeldTooLongIsRefusedNotRun(t *testing.T) {
	ns := natstest.Start(t)
	f := peertest.NewPayFixture(t, 0)
	// One replica: no false death to fear from a short timeout.
	opts := replicaOpts(t, ns.URL(), "solo")
	opts.Timeout = time.Second
	srv := peertest.Serve(t, contextvm.ServerOptions{Relays: []string{f.Relay.URL}, Replicas: replica.New(opts)}, peertest.CounterServer(&f.Calls))
	awaitGroup(t, 1, srv)
	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{f.Relay.URL}, RequestTimeout: testwait.Timeout(20 * time.Second)})
	natsLost(t, ns, srv)
	res := callHeld(t, cs, srv, 1)
	// Pacing that is the behaviour under test: held past twice the
	// membership timeout.
	time.Sleep(2 * opts.Timeout)
	ns.Restart()
	if err := <-res; peertest.RPCCode(err) != contextvm.CodeReplicaUnavailable {
		t.Fatalf("call held too long: %v; want %d", err, contextvm.CodeReplicaUnavailable)
	}
	if n := f.Calls.Load(); n != 0 {
		t.Fatalf("%d executions of a call refused", n)
	}
	if _, err := peertest.Call(cs, "count", nil); err != nil {
		t.Fatalf("call after NATS came back: %v", err)
	}
	if st, _ := status(srv); f.Calls.Load() != 1 || st.Refused != 1 {
		t.Fatalf("%d executions, group %+v; want 1, one refused", f.Calls.Load(), st)
	}
}

// leaders counts the replicas that hold the announcer lease.
func leaders(srvs ...*contextvm.Server) (n int, who *contextvm.Server) {
	for _, s := range srvs {
		if st, _ := status(s); st.Leader {
			n, who = n+1, s
		}
	}
	return n, who
}

// One replica at a time announces; when it goes, another takes over.
func TestReplicas_OneAnnouncerAndTakeover(t *testing.T) {
	ns := natstest.Start(t)
	f := peertest.NewPayFixture(t, 0)
	signer := contextvm.NewKeySigner(nostr.Generate())
	var srvs []*contextvm.Server
	for _, m := range []string{"a", "b", "c"} {
		srvs = append(srvs, peertest.Serve(t, contextvm.ServerOptions{Signer: signer, Relays: []string{f.Relay.URL}, Announce: true,
			Replicas: replica.New(replicaOpts(t, ns.URL(), m))}, peertest.CounterServer(&f.Calls)))
	}
	awaitGroup(t, 3, srvs...)
	await := func(srvs []*contextvm.Server) *contextvm.Server {
		t.Helper()
		var n int
		var who *contextvm.Server
		testwait.Until(t.Context(), 10*time.Second, func() bool {
			n, who = leaders(srvs...)
			return n > 0 // one, or more at once: a failure seen at once
		})
		if n != 1 {
			t.Fatalf("%d announcers", n)
		}
		return who
	}
	first := await(srvs)
	first.Close()
	var rest []*contextvm.Server
	for _, s := range srvs {
		if s != first {
			rest = append(rest, s)
		}
	}
	await(rest)
}

// A replica that closes says so: the others take its clients at once, not
// after the membership timeout.
func TestReplicas_LeavingIsSeenAtOnce(t *testing.T) {
	ns := natstest.Start(t)
	f := peertest.NewPayFixture(t, 0)
	signer := contextvm.NewKeySigner(nostr.Generate())
	var srvs []*contextvm.Server
	for _, m := range []string{"a", "b"} {
		ro := replicaOpts(t, ns.URL(), m)
		ro.Timeout = time.Minute
		opts := contextvm.ServerOptions{Signer: signer, Relays: []string{f.Relay.URL}, Replicas: replica.New(ro)}
		srvs = append(srvs, peertest.Serve(t, opts, peertest.CounterServer(&f.Calls)))
	}
	awaitGroup(t, 2, srvs...)
	srvs[0].Close()
	awaitGroup(t, 1, srvs[1])
}
