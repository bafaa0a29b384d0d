package participant

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MCPx methods the client treats specially.
const (
	methodChat     = "notifications/chat/message"
	methodDiscover = "server/discover"
)

// encodeRPC is the payload of an envelope carrying msg.
func encodeRPC(msg jsonrpc.Message) (json.RawMessage, error) {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("mcpx: encode JSON-RPC: %w", err)
	}
	return b, nil
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
