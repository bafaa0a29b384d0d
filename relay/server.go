package relay

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/cvmgo/cvm/internal/httpserve"
)

// Server is a Relay listening on a TCP address.
type Server struct {
	*Relay

	// URL is the websocket URL clients connect to, e.g. ws://127.0.0.1:7777.
	URL string
	// Addr is the address the listener is bound to.
	Addr net.Addr

	http *httpserve.Server
}

// Start builds a relay and serves it on addr ("127.0.0.1:0" picks a free
// port). The caller must Close the Server.
func Start(addr string, opts Options) (*Server, error) {
	r, err := New(opts)
	if err != nil {
		return nil, err
	}
	hs, err := httpserve.Listen(addr, r, r.khatru.Log)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("relay: %w", err)
	}
	s := &Server{Relay: r, URL: "ws://" + hs.Addr.String(), Addr: hs.Addr, http: hs}
	return s, nil
}

// Wait blocks until the server stops serving and returns why; after Close it
// returns nil.
func (s *Server) Wait() error { return s.http.Wait() }

// Close stops accepting connections, disconnects every client and closes the
// store. Idempotent.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if cerr := s.Relay.Close(); err == nil {
		err = cerr
	}
	return err
}
