package gatewaytest

import (
	"net/http"
	"sync"
	"testing"
)

// Harness is what a conformance test body sees of the gateway it tests:
// one node (a *Gateway), or several nodes sharing a backend (*Nodes)
// with the participants spread over them.
type Harness interface {
	// Join dials participant id into topic and reads its welcome.
	Join(topic, id string, opts ...TokenOpt) (*Client, *Msg)
	// Dial connects participant id to topic and reads nothing.
	Dial(topic, id string, opts ...TokenOpt) *Client
	// Token mints a token every node accepts.
	Token(topic, id string, opts ...TokenOpt) string
	// Get and HistoryPage are REST calls, to one of the nodes.
	Get(path, token string, out any) (int, http.Header)
	HistoryPage(topic, viewer, query string) ([]Msg, bool)
}

// Nodes is a Harness over gateway nodes sharing one backend and one set
// of keys: the i-th participant id it sees is connected to node i%N,
// every time; REST calls go to the nodes in turn.
type Nodes struct {
	T     testing.TB
	Nodes []*Gateway

	mu   sync.Mutex
	node map[string]int // participant id -> node
	rest int            // REST calls so far
}

func (h *Nodes) nodeOf(id string) *Gateway {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.node == nil {
		h.node = map[string]int{}
	}
	i, ok := h.node[id]
	if !ok {
		i = len(h.node) % len(h.Nodes)
		h.node[id] = i
	}
	return h.Nodes[i]
}

func (h *Nodes) restNode() *Gateway {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rest++
	return h.Nodes[h.rest%len(h.Nodes)]
}

// Join implements Harness.
func (h *Nodes) Join(topic, id string, opts ...TokenOpt) (*Client, *Msg) {
	h.T.Helper()
	return h.nodeOf(id).Join(topic, id, opts...)
}

// Dial implements Harness.
func (h *Nodes) Dial(topic, id string, opts ...TokenOpt) *Client {
	h.T.Helper()
	return h.nodeOf(id).Dial(topic, id, opts...)
}

// Token implements Harness.
func (h *Nodes) Token(topic, id string, opts ...TokenOpt) string {
	return h.Nodes[0].Token(topic, id, opts...)
}

// Get implements Harness.
func (h *Nodes) Get(path, token string, out any) (int, http.Header) {
	h.T.Helper()
	return h.restNode().Get(path, token, out)
}

// HistoryPage implements Harness.
func (h *Nodes) HistoryPage(topic, viewer, query string) ([]Msg, bool) {
	h.T.Helper()
	return h.restNode().HistoryPage(topic, viewer, query)
}
