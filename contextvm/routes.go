package contextvm

import (
	"encoding/json"
	"maps"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// route remembers where the answer to one request goes.
type route struct {
	origID   jsonrpc.ID
	eventID  nostr.ID
	wrapKind nostr.Kind
	token    mcpmsg.Token // progress token, if any
	method   string
	batch    *batch          // the batch it came in, if any
	index    int             // its position there
	created  nostr.Timestamp // created_at of the event it came in

	mu       sync.Mutex                 // guards what follows
	progress time.Time                  // when the latest progress notification for it went out
	stream   *StreamWriter              // an open stream for the request, if the tool opened one
	held     *jsonrpc.Response          // the result, held until the stream ends
	kept     *Call                      // the call whose answer the Gate asked for (Call.Keep), if it did
	meta     map[string]json.RawMessage // what the Gate puts in the result's _meta (Call.SetMeta)
	after    <-chan struct{}            // closed once the answer may go out (Call.AnswerAfter), if set
}

// withMeta returns resp with the Gate's _meta entries (Call.SetMeta) in
// its result, if it is a JSON object.
func (r *route) withMeta(resp jsonrpc.Response) jsonrpc.Response {
	r.mu.Lock()
	meta := r.meta
	r.mu.Unlock()
	if len(meta) == 0 || resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(resp.Result, &res) != nil || res == nil {
		return resp
	}
	var m map[string]json.RawMessage
	if raw, ok := res["_meta"]; ok && json.Unmarshal(raw, &m) != nil {
		return resp
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	maps.Copy(m, meta)
	var err error
	if res["_meta"], err = json.Marshal(m); err != nil {
		return resp
	}
	if b, err := json.Marshal(res); err == nil {
		resp.Result = b
	}
	return resp
}

// keptBy is the call whose answer the Gate asked for, nil if it did not.
func (r *route) keptBy() *Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kept
}

// afterClosed is what the answer waits for before it goes out
// (Call.AnswerAfter), nil if nothing.
func (r *route) afterClosed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.after
}

// settle is how long the response must still wait for the request's
// latest progress notification to settle (see progressSettle): zero when
// none went out within it.
func (r *route) settle() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.progress.IsZero() {
		return 0
	}
	return max(0, progressSettle-time.Since(r.progress))
}

// routeTable holds a session's requests in flight, under a lock of its own:
// by route key (the id the go-sdk sees), by the client's JSON-RPC id (which
// cancellations name) and by progress token (which progress notifications
// and stream frames name). Keys, ids and tokens are the client's, so the
// table is per session: another client's 1 or "t" is another request.
// Taking a route out (drop, close) is the right to answer it.
type routeTable struct {
	mu       sync.Mutex
	closed   bool
	byKey    map[string]*route
	byOrigID map[jsonrpc.ID]string
	byToken  map[mcpmsg.Token]string
}

// addResult is what routeTable.add made of a route.
type addResult int

const (
	added     addResult = iota
	duplicate           // a request under that key is in flight: a replay
	refused             // the table is closed: the session is ending
)

func newRouteTable() *routeTable {
	return &routeTable{
		byKey:    make(map[string]*route),
		byOrigID: make(map[jsonrpc.ID]string),
		byToken:  make(map[mcpmsg.Token]string),
	}
}

// add registers r under key.
func (t *routeTable) add(key string, r *route) addResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return refused
	case t.byKey[key] != nil:
		return duplicate
	}
	t.byKey[key] = r
	t.byOrigID[r.origID] = key
	if !r.token.IsZero() {
		t.byToken[r.token] = key
	}
	return added
}

// get returns the route under key, or nil.
func (t *routeTable) get(key string) *route {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byKey[key]
}

// keyOf returns the key of the request the client calls id.
func (t *routeTable) keyOf(id jsonrpc.ID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key, ok := t.byOrigID[id]
	return key, ok
}

// forToken returns the key and route of the request in flight that asked
// for progress under tok.
func (t *routeTable) forToken(tok mcpmsg.Token) (string, *route) {
	if tok.IsZero() {
		return "", nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key, ok := t.byToken[tok]
	if !ok {
		return "", nil
	}
	return key, t.byKey[key]
}

// drop takes out the route under key and returns it, nil if it was not
// there.
func (t *routeTable) drop(key string) *route {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byKey[key]
	if r == nil {
		return nil
	}
	delete(t.byKey, key)
	delete(t.byOrigID, r.origID)
	if !r.token.IsZero() && t.byToken[r.token] == key {
		delete(t.byToken, r.token)
	}
	return r
}

// len is the number of requests in flight.
func (t *routeTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byKey)
}

// close refuses new routes and takes out, and returns, every route in
// flight.
func (t *routeTable) close() []*route {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	out := make([]*route, 0, len(t.byKey))
	for _, r := range t.byKey {
		out = append(out, r)
	}
	clear(t.byKey)
	clear(t.byOrigID)
	clear(t.byToken)
	return out
}
