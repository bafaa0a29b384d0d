package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// serveRawHub is the baseline server (-raw-hub): the same websocket library
// as the gateway with none of its work. /hub sends every frame it receives
// to every connection, the sender included; /echo returns each frame to its
// sender. Each connection has a writer goroutine and a buffered channel,
// the plainest correct way to fan out without one slow reader blocking the
// rest.
func serveRawHub() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var (
		mu    sync.Mutex
		conns = map[chan []byte]struct{}{}
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/hub", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		c.SetReadLimit(1 << 20)
		out := make(chan []byte, 4096)
		mu.Lock()
		conns[out] = struct{}{}
		mu.Unlock()
		// Registered: only now may the client count on every broadcast
		// (the gateway's welcome plays the same part).
		out <- []byte(`{"hello":true}`)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for f := range out {
				if c.Write(context.Background(), websocket.MessageText, f) != nil {
					return
				}
			}
		}()
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				break
			}
			mu.Lock()
			for o := range conns {
				o <- data
			}
			mu.Unlock()
		}
		mu.Lock()
		delete(conns, out)
		mu.Unlock()
		close(out)
		<-done
		c.CloseNow()
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, data, err := c.Read(context.Background())
			if err != nil || c.Write(context.Background(), typ, data) != nil {
				return
			}
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	json.NewEncoder(os.Stdout).Encode(map[string]any{"ready": true, "url": "ws://" + ln.Addr().String()})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}

// newRawRoom connects n clients to the raw hub.
func newRawRoom(url string, n int) (*swarm, error) {
	s := newSwarm(n)
	for i := 0; i < n; i++ {
		ctx, cancel := withTimeout(10 * time.Second)
		conn, _, err := websocket.Dial(ctx, url+"/hub", nil)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("raw client %d: %w", i, err)
		}
		conn.SetReadLimit(1 << 20)
		ctx, cancel = withTimeout(10 * time.Second)
		_, _, err = conn.Read(ctx) // the hub's hello: registered
		cancel()
		if err != nil {
			return nil, fmt.Errorf("raw client %d: no hello: %w", i, err)
		}
		s.conns, s.ids = append(s.conns, conn), append(s.ids, fmt.Sprintf("p%03d", i))
	}
	s.start()
	return s, nil
}

// echoRTT times n sequential round trips through the raw hub's /echo.
func echoRTT(url string, n int) (p50, p99 time.Duration, err error) {
	ctx, cancel := withTimeout(60 * time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, url+"/echo", nil)
	if err != nil {
		return 0, 0, err
	}
	defer conn.CloseNow()
	frame := []byte(`{"protocol":"mcp-x/v0","id":"rq-1","ts":"2026-01-01T00:00:00Z","from":"p000","to":["p001"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}}`)
	samples := make([]time.Duration, 0, n)
	for k := 0; k < n; k++ {
		start := time.Now()
		if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
			return 0, 0, err
		}
		if _, _, err := conn.Read(ctx); err != nil {
			return 0, 0, err
		}
		samples = append(samples, time.Since(start))
	}
	p50, p99 = percentiles(samples)
	return p50, p99, nil
}
