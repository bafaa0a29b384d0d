package natstest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an embedded NATS server with JetStream. Stop and Start it again
// to simulate an outage: it comes back on the same port with the same store.
type Server struct {
	t    testing.TB
	dir  string
	port int
	// lazySync leaves NATS's default fsync interval (2 min) instead of
	// sync always: what a production nats-server does by default.
	lazySync bool

	mu  sync.Mutex
	srv *server.Server
}

// Start runs a server on a free loopback port, stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Stop)
	return s
}

// StartDefaultSync is Start with NATS's default durability (fsync every
// 2 min, not per write), for benchmarks that measure what a production
// nats-server costs.
func StartDefaultSync(t testing.TB) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir(), lazySync: true, t: t}
	if err := s.listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// New runs a server storing in dir on a free loopback port, for callers
// without a testing.TB (benchmark programs). The caller must Stop it.
func New(dir string) (*Server, error) {
	s := &Server{dir: dir}
	if err := s.listen(); err != nil {
		return nil, err
	}
	return s, nil
}

// listen picks a free port and starts there.
func (s *Server) listen() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	return s.start()
}

func (s *Server) start() error {
	opts := &server.Options{
		Host:       "127.0.0.1",
		Port:       s.port,
		JetStream:  true,
		StoreDir:   s.dir,
		SyncAlways: !s.lazySync,
		NoLog:      true,
		NoSigs:     true,
		ServerName: "cvm-test",
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("natstest: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("natstest: server on port %d not ready in 30 s", s.port)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

// URL is the client URL, e.g. nats://127.0.0.1:4222.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Stop shuts the server down and waits for it; safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart starts a stopped server again, on the same port and store.
func (s *Server) Restart() {
	if err := s.start(); err != nil {
		if s.t != nil {
			s.t.Fatal(err)
		}
		panic(err)
	}
}
