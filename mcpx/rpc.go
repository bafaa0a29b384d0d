package mcpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// DefaultProtocolVersion is the MCP version the client and the bridge ask
// for in initialize. Peers negotiate down (MCPx v0 requires at least the
// 2025-06-18 negotiation rules); the TypeScript SDK tops out here.
const DefaultProtocolVersion = "2025-11-25"

// CodeRequestTimeout is MCP's JSON-RPC code for a request that got no answer
// in time (the TypeScript SDK's ErrorCode.RequestTimeout); the client answers
// a go-sdk session with it when a peer stays silent.
const CodeRequestTimeout = -32001

// MCP methods the client and the bridge treat specially.
const (
	methodInitialize    = "initialize"
	methodInitialized   = "notifications/initialized"
	methodPing          = "ping"
	methodCancelled     = "notifications/cancelled"
	methodProgress      = "notifications/progress"
	methodChat          = "notifications/chat/message"
	methodDiscover      = "server/discover"
	methodSubscribe     = "resources/subscribe"
	methodUnsubscribe   = "resources/unsubscribe"
	methodSetLevel      = "logging/setLevel"
	methodResUpdated    = "notifications/resources/updated"
	methodRootsList     = "roots/list"
	methodRootsChanged  = "notifications/roots/list_changed"
	methodToolsChanged  = "notifications/tools/list_changed"
	methodPromptsChange = "notifications/prompts/list_changed"
	methodResChanged    = "notifications/resources/list_changed"
)

// clientSideMethod reports whether a request with this method is one a
// server sends to its client (so it belongs to the receiver's MCP client
// session with the sender, not to the receiver's own server).
func clientSideMethod(method string) bool {
	switch method {
	case "sampling/createMessage", "elicitation/create", methodRootsList:
		return true
	}
	return false
}

// encodeRPC is the payload of an envelope carrying msg.
func encodeRPC(msg jsonrpc.Message) (json.RawMessage, error) {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("mcpx: encode JSON-RPC: %w", err)
	}
	return b, nil
}

// marshalParams encodes v without HTML escaping: MCP payloads are not HTML,
// and peers compare text byte for byte.
func marshalParams(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// idKey is a JSON-RPC id as a map key: int64 or string, never coerced
// into each other.
func idKey(id jsonrpc.ID) any { return id.Raw() }

// progressToken returns params._meta.progressToken as raw JSON, or nil.
func progressToken(params json.RawMessage) json.RawMessage {
	if len(params) == 0 {
		return nil
	}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || isNull(p.Meta.ProgressToken) {
		return nil
	}
	return p.Meta.ProgressToken
}

// notificationToken returns the progressToken of a notifications/progress.
func notificationToken(params json.RawMessage) json.RawMessage {
	var p struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil || isNull(p.ProgressToken) {
		return nil
	}
	return p.ProgressToken
}

// cancelledRequestID returns notifications/cancelled's requestId.
func cancelledRequestID(params json.RawMessage) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// setField returns the JSON object obj with key set to value (or removed
// when value is nil), keeping every other member's bytes. path names nested
// objects: setField(params, tok, "_meta", "progressToken").
func setField(obj json.RawMessage, value json.RawMessage, path ...string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if !isNull(obj) {
		if err := json.Unmarshal(obj, &m); err != nil {
			return nil, fmt.Errorf("not a JSON object: %w", err)
		}
	}
	key := path[0]
	if len(path) > 1 {
		inner, err := setField(m[key], value, path[1:]...)
		if err != nil {
			return nil, err
		}
		value = inner
	}
	if value == nil {
		delete(m, key)
	} else {
		m[key] = value
	}
	return marshalParams(m)
}

// errorResponse is a JSON-RPC error answer to id.
func errorResponse(id jsonrpc.ID, code int64, format string, args ...any) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// wireError returns the JSON-RPC error inside err, if any.
func wireError(err error) (*jsonrpc.Error, bool) {
	var werr *jsonrpc.Error
	ok := errors.As(err, &werr)
	return werr, ok
}

// msgQueue is an unbounded FIFO of JSON-RPC messages between the client's
// receive goroutine, which must never block on a slow consumer (it also
// answers the gateway's pings), and one reader. Its size is bounded in
// practice by the gateway's per-participant rate limit.
type msgQueue struct {
	mu       sync.Mutex
	items    []jsonrpc.Message
	draining bool          // closing once the items are read
	wake     chan struct{} // 1-buffered
	closed   chan struct{}
	once     sync.Once
}

func newMsgQueue() *msgQueue {
	return &msgQueue{wake: make(chan struct{}, 1), closed: make(chan struct{})}
}

// push queues msg; after close it is dropped.
func (q *msgQueue) push(msg jsonrpc.Message) {
	select {
	case <-q.closed:
		return
	default:
	}
	q.mu.Lock()
	q.items = append(q.items, msg)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop waits for the next message. It fails once the queue is closed, even
// with messages left: a closed connection delivers nothing more.
func (q *msgQueue) pop(done <-chan struct{}) (jsonrpc.Message, error) {
	for {
		select {
		case <-q.closed:
			return nil, errConnClosed
		default:
		}
		q.mu.Lock()
		if len(q.items) > 0 {
			m := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.mu.Unlock()
			return m, nil
		}
		draining := q.draining
		q.mu.Unlock()
		if draining {
			q.close()
			return nil, errConnClosed
		}
		select {
		case <-q.wake:
		case <-q.closed:
			return nil, errConnClosed
		case <-done:
			return nil, errConnClosed
		}
	}
}

func (q *msgQueue) close() { q.once.Do(func() { close(q.closed) }) }

// drainThenClose lets the reader have what is queued, then closes.
func (q *msgQueue) drainThenClose() {
	q.mu.Lock()
	q.draining = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// intID is a numeric JSON-RPC id. Counters stay far below 2^53, where a
// float64 would lose precision.
func intID(n int64) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(float64(n))
	return id
}
