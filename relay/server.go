package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server is a Relay listening on a TCP address.
type Server struct {
	*Relay

	// URL is the websocket URL clients connect to, e.g. ws://127.0.0.1:7777.
	URL string
	// Addr is the address the listener is bound to.
	Addr net.Addr

	http *http.Server
	done chan error
}

// Start builds a relay and serves it on addr ("127.0.0.1:0" picks a free
// port). The caller must Close the Server.
func Start(addr string, opts Options) (*Server, error) {
	r, err := New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("relay: listen: %w", err)
	}
	s := &Server{
		Relay: r,
		URL:   "ws://" + ln.Addr().String(),
		Addr:  ln.Addr(),
		http: &http.Server{
			Handler:           r,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          r.khatru.Log,
		},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.http.Serve(ln) }()
	return s, nil
}

// Wait blocks until the server stops serving and returns why; after Close it
// returns nil.
func (s *Server) Wait() error {
	err := <-s.done
	s.done <- err
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

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
