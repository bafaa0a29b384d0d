package relay_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/relay"
)

// pipeRelay is a relay served over in-memory pipes instead of TCP, so that
// a test can run it inside a testing/synctest bubble: its clock is the
// bubble's, and a test that waits for time to pass waits for nothing.
type pipeRelay struct {
	*relay.Relay
	t     *testing.T
	conns chan net.Conn
	done  chan struct{}
	close sync.Once
}

// startPipeRelay serves a relay until the test ends. Call it inside the
// bubble.
func startPipeRelay(t *testing.T, opts relay.Options) *pipeRelay {
	t.Helper()
	r, err := relay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeRelay{Relay: r, t: t, conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: r}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(p)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
		r.Close()
	})
	return p
}

// Accept, Close and Addr make a pipeRelay the server's net.Listener.
func (p *pipeRelay) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeRelay) Close() error {
	p.close.Do(func() { close(p.done) })
	return nil
}

func (p *pipeRelay) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "relay.test:80" }

// dial connects a client to the relay through a pipe.
func (p *pipeRelay) dial() *wsClient {
	p.t.Helper()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			server, client := net.Pipe()
			select {
			case p.conns <- server:
				return client, nil
			case <-p.done:
				return nil, net.ErrClosed
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}}
	c, _, err := websocket.Dial(p.t.Context(), "ws://relay.test", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		p.t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(16 << 20)
	p.t.Cleanup(func() {
		c.CloseNow()
		hc.CloseIdleConnections()
	})
	return &wsClient{t: p.t, conn: c}
}
