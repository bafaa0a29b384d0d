// Package httpserve serves an http.Handler on a TCP address with one
// goroutine that Shutdown waits for: the listening half that the relay, the
// room gateway and the CLI's metrics endpoints share.
//
// Files: httpserve.go (Listen, Server), error.go (WriteError, the JSON
// refusal every cvm HTTP endpoint answers with).
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"
)

// readHeaderTimeout bounds how long a client may take to send its request
// headers: a connection that trickles them would otherwise hold a goroutine
// and a socket forever (slowloris).
const readHeaderTimeout = 10 * time.Second

// Server is a handler being served on a listener.
type Server struct {
	// Addr is the address the listener is bound to; with port 0 asked for,
	// it has the port chosen.
	Addr net.Addr

	http *http.Server
	done chan error // receives Serve's result once, and keeps it
}

// Listen listens on addr ("127.0.0.1:0" picks a free port) and serves h
// there until Shutdown. errorLog, if not nil, receives the HTTP server's own
// errors.
func Listen(addr string, h http.Handler, errorLog *log.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{
		Addr: ln.Addr(),
		http: &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ErrorLog: errorLog},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.http.Serve(ln) }()
	return s, nil
}

// Wait blocks until the server stops serving and returns why; after
// Shutdown it returns nil.
func (s *Server) Wait() error {
	err := <-s.done
	s.done <- err
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits, within ctx, for the
// requests in progress and for the serving goroutine. Connections a handler
// hijacked (WebSockets) are the handler's to close.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if werr := s.Wait(); err == nil {
		err = werr
	}
	return err
}
