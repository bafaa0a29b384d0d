package room

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cvmgo/cvm/internal/httpserve"
)

// Server is a Gateway listening on a TCP address.
type Server struct {
	*Gateway

	// URL is the gateway's base URL, e.g. http://127.0.0.1:7070; the
	// WebSocket endpoint is WSURL.
	URL string
	// WSURL is the WebSocket endpoint without the topic, e.g.
	// ws://127.0.0.1:7070/v0/ws.
	WSURL string
	// Addr is the address the listener is bound to.
	Addr net.Addr

	http *httpserve.Server
}

// Start builds a gateway and serves it on addr ("127.0.0.1:0" picks a free
// port). The caller must Close the Server.
func Start(addr string, opts Options) (*Server, error) {
	g, err := New(opts)
	if err != nil {
		return nil, err
	}
	hs, err := httpserve.Listen(addr, g, nil)
	if err != nil {
		g.Close(context.Background())
		return nil, fmt.Errorf("mcpx room: %w", err)
	}
	s := &Server{
		Gateway: g,
		URL:     "http://" + hs.Addr.String(),
		WSURL:   "ws://" + hs.Addr.String() + "/v0/ws",
		Addr:    hs.Addr,
		http:    hs,
	}
	return s, nil
}

// Wait blocks until the server stops serving and returns why; after Close it
// returns nil.
func (s *Server) Wait() error { return s.http.Wait() }

// Close stops accepting connections, then closes every participant's
// connection (1001 going away). Peers get shutdownGrace to answer the close
// handshake; the rest are dropped, which is not an error.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Shutdown does not wait for hijacked connections; Gateway.Close does.
	err := s.http.Shutdown(ctx)
	if gerr := s.Gateway.Close(ctx); gerr != nil && !errors.Is(gerr, context.DeadlineExceeded) {
		err = errors.Join(err, gerr)
	}
	return err
}

// shutdownGrace bounds how long Close waits for peers to acknowledge the
// close frame. A client that stopped reading never does, and must not hold
// a shutdown (or the CLI's exit) for the websocket library's own 5 s wait.
const shutdownGrace = 2 * time.Second
