package room_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/room"
	"github.com/cvmgo/cvm/mcpx/room/internal/gatewaytest"
	"github.com/cvmgo/cvm/mcpx/room/roomnats"
)

// clusterNodes is how many nodes the cluster variant runs.
const clusterNodes = 3

// bothModes runs body against a single gateway and against three nodes
// sharing one embedded JetStream (the roomnats backend), as subtests
// "single" and "cluster": the gateway's join, leave and publish are the
// same code over either backend, and so must be what participants see.
// The subtests run one after the other, never in parallel.
//
// Bodies that stay single-node, and why:
//   - HistoryTimeCursor: it drives the gateway's clock (Options.Now); on a
//     cluster JetStream stamps the time, which a test cannot set.
//   - HistorySurvivesRestartAndEmptyTopics, HistoryDisabled: they are about
//     the in-process store (reopened, or absent); a cluster always has
//     history, in JetStream (roomnats's tests restart NATS instead).
//   - LivePeersGetHeartbeatsAndDeadPeersLeave, UnreadableFrame*,
//     OversizeBeyondTheHardLimit*, RateLimit*, BrowserBearerSubprotocol,
//     UpgradeRefusals, CloseSendsGoingAway, ForwardsCanonicalEnvelopes:
//     what they test is done by the node holding the connection, by the
//     same code on one node or several.
//   - RESTEndpoints: it counts one node's connections in /metrics.
//   - kill_test.go (TestGateway_Killed*), durability_test.go,
//     cursor_test.go, ws_test.go: the crash and durability of the bbolt
//     store and one node's connection handling; the cluster's are in
//     package roomnats and kill_test.go (TestNATS_Killed*).
func bothModes(t *testing.T, opts room.Options, body func(t *testing.T, g gatewaytest.Harness)) {
	t.Helper()
	t.Run("single", func(t *testing.T) { body(t, gatewaytest.Start(t, opts)) })
	t.Run("cluster", func(t *testing.T) { body(t, startNodes(t, clusterNodes, opts)) })
}

// startNodes starts n gateway nodes sharing one embedded JetStream server
// (sync always) through roomnats, with one set of keys.
func startNodes(t *testing.T, n int, opts room.Options) *gatewaytest.Nodes {
	t.Helper()
	srv := natstest.Start(t)
	opts.Tokens = gatewaytest.NewKeys(t)
	h := &gatewaytest.Nodes{T: t}
	for range n {
		g, _ := startNode(t, srv, opts, nil)
		h.Nodes = append(h.Nodes, g)
	}
	return h
}

// startNode starts a gateway node on srv whose backend is a roomnats
// Cluster, or what wrap (nil: none) makes of it.
func startNode(t *testing.T, srv *natstest.Server, opts room.Options, wrap func(*roomnats.Cluster) room.Backend) (*gatewaytest.Gateway, *roomnats.Cluster) {
	t.Helper()
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	conn, err := natsx.Connect(ctx, srv.URL(), natsx.Options{Logger: log, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := roomnats.NewCluster(ctx, conn, roomnats.ClusterOptions{NodeTimeout: 2 * time.Second, RetryAfter: 250 * time.Millisecond, Logger: log})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	opts.Backend = cl
	if wrap != nil {
		opts.Backend = wrap(cl)
	}
	g := gatewaytest.Start(t, opts)
	// Cleanups run last-in first-out: the gateway closes first.
	t.Cleanup(func() { cl.Close(); conn.Close() })
	return g, cl
}
