package natstest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a Server: a client that connects
// through it can be cut off from NATS while the others keep their links,
// and let back. Safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	pipes sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards every connection
// to s, until the test ends.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: fmt.Sprintf("127.0.0.1:%d", s.port), conns: map[net.Conn]struct{}{}}
	var accepting sync.WaitGroup
	accepting.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		accepting.Wait()
		p.Cut()
		p.pipes.Wait()
	})
	return p
}

// URL is the client URL of the proxy.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut closes every connection through the proxy, and every new one at
// once, until Restore: the clients behind it reconnect in vain.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.isCut() {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) { // cut meanwhile
			c.Close()
			up.Close()
			continue
		}
		for _, dir := range [][2]net.Conn{{up, c}, {c, up}} {
			p.pipes.Go(func() {
				io.Copy(dir[0], dir[1])
				// One side is done: so is the other.
				dir[0].Close()
				dir[1].Close()
			})
		}
	}
}

func (p *Proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// track records a new pair of connections, unless the proxy is cut.
func (p *Proxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	return true
}
