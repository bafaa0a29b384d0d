package room

import (
	"net/http"
	"sync"
	"testing"
)

// harness is what a conformance test body sees of the gateway it tests:
// one node (a *testGateway), or a cluster of nodes (clusterHarness) with
// the participants spread over them. The bodies that run in both modes
// (bothModes) use only this.
type harness interface {
	// join dials participant id into topic and reads its welcome.
	join(topic, id string, opts ...tokenOpt) (*client, *msg)
	// dial connects participant id to topic and reads nothing.
	dial(topic, id string, opts ...tokenOpt) *client
	// token mints a token every node accepts.
	token(topic, id string, opts ...tokenOpt) string
	// get and historyPage are REST calls, to one of the nodes.
	get(path, token string, out any) (int, http.Header)
	historyPage(topic, viewer, query string) ([]msg, bool)
}

// clusterNodes is how many nodes the cluster variant runs.
const clusterNodes = 3

// bothModes runs body against a single gateway and against three nodes
// sharing one embedded JetStream, as subtests "single" and "cluster". The
// subtests run one after the other, never in parallel.
//
// Bodies that stay single-node, and why:
//   - HistoryTimeCursor: it drives the gateway's clock (Options.Now); on a
//     cluster JetStream stamps the time, which a test cannot set.
//   - HistorySurvivesRestartAndEmptyTopics, HistoryDisabled: they are about
//     the in-process store (reopened, or absent); a cluster always has
//     history, in JetStream (cluster_test.go restarts NATS instead).
//   - LivePeersGetHeartbeatsAndDeadPeersLeave, UnreadableFrame*,
//     OversizeBeyondTheHardLimit*, RateLimit*, BrowserBearerSubprotocol,
//     UpgradeRefusals, CloseSendsGoingAway, ForwardsCanonicalEnvelopes:
//     what they test is done by the node holding the connection, by the
//     same code on one node or several.
//   - RESTEndpoints: it counts one node's connections in /metrics.
//   - kill_test.go (TestGateway_Killed*), durability_test.go,
//     cursor_test.go, ws_test.go: the crash and durability of the bbolt
//     store and one node's connection handling; the cluster's are in
//     cluster_test.go and kill_test.go (TestNATS_Killed*).
func bothModes(t *testing.T, opts Options, body func(t *testing.T, g harness)) {
	t.Helper()
	t.Run("single", func(t *testing.T) { body(t, startGateway(t, opts)) })
	t.Run("cluster", func(t *testing.T) {
		body(t, &clusterHarness{tc: startCluster(t, clusterNodes, opts), node: map[string]int{}})
	})
}

// clusterHarness is a harness over a testCluster: the i-th participant id
// it sees is connected to node i%N, every time; REST calls go to the nodes
// in turn.
type clusterHarness struct {
	tc *testCluster

	mu   sync.Mutex
	node map[string]int // participant id -> node
	rest int            // REST calls so far
}

func (h *clusterHarness) nodeOf(id string) *testGateway {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok := h.node[id]
	if !ok {
		i = len(h.node) % len(h.tc.nodes)
		h.node[id] = i
	}
	return h.tc.nodes[i]
}

func (h *clusterHarness) restNode() *testGateway {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rest++
	return h.tc.nodes[h.rest%len(h.tc.nodes)]
}

func (h *clusterHarness) join(topic, id string, opts ...tokenOpt) (*client, *msg) {
	h.tc.t.Helper()
	return h.nodeOf(id).join(topic, id, opts...)
}

func (h *clusterHarness) dial(topic, id string, opts ...tokenOpt) *client {
	h.tc.t.Helper()
	return h.nodeOf(id).dial(topic, id, opts...)
}

func (h *clusterHarness) token(topic, id string, opts ...tokenOpt) string {
	return h.tc.nodes[0].token(topic, id, opts...)
}

func (h *clusterHarness) get(path, token string, out any) (int, http.Header) {
	h.tc.t.Helper()
	return h.restNode().get(path, token, out)
}

func (h *clusterHarness) historyPage(topic, viewer, query string) ([]msg, bool) {
	h.tc.t.Helper()
	return h.restNode().historyPage(topic, viewer, query)
}
