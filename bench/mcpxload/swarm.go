package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/room"
)

// swarm is the load generator's participants: one connection and one
// reader goroutine each. Participant 0 publishes; participant 1 answers
// directed requests.
type swarm struct {
	conns []*websocket.Conn
	ids   []string
	wg    sync.WaitGroup

	// Fan-out phase.
	window chan struct{} // a token per broadcast in flight; participant 0's echo frees one
	// counts[i] is participant i's deliveries. Reader i appends to
	// samples[i] before it increments counts[i], so a reader of counts
	// that saw the final value may read samples[i].
	counts     []atomic.Int64
	samples    [][]time.Duration
	sampleRate int
	// gaps counts envelopes that arrived out of seq order (the gateway
	// numbers a topic's envelopes; the raw hub does not, and is not checked).
	gaps      atomic.Int64
	checkSeqs bool

	// Directed phase.
	replies chan struct{}
}

func newSwarm(n int) *swarm {
	return &swarm{counts: make([]atomic.Int64, n), samples: make([][]time.Duration, n), replies: make(chan struct{}, 1), sampleRate: 10}
}

// newRoom connects n participants to the gateway at url, with tokens minted
// from the gateway's key directory, and waits until each has its welcome.
func newRoom(url, data string, n int) (*swarm, error) {
	return newRoomOn([]string{url}, data, n)
}

// newRoomOn is newRoom with the participants spread over the gateway nodes
// at urls, round-robin: participant 0 on the first, participant 1 on the
// second (if there are two).
func newRoomOn(urls []string, data string, n int) (*swarm, error) {
	keys, err := room.LoadOrCreateKeys(data)
	if err != nil {
		return nil, err
	}
	s := newSwarm(n)
	s.checkSeqs = true
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("p%03d", i)
		tok, err := keys.Sign(room.Claims{Subject: id, Audience: room.Audience{"bench"}, ExpiresAt: time.Now().Add(time.Hour).Unix()}, room.AlgEdDSA)
		if err != nil {
			return nil, err
		}
		ctx, cancel := withTimeout(10 * time.Second)
		conn, _, err := websocket.Dial(ctx, urls[i%len(urls)]+"?topic=bench", &websocket.DialOptions{
			HTTPHeader:   http.Header{"Authorization": {"Bearer " + tok}},
			Subprotocols: []string{mcpx.Subprotocol},
		})
		if err == nil {
			_, _, err = conn.Read(ctx) // the welcome
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("participant %s: %w", id, err)
		}
		conn.SetReadLimit(1 << 20)
		s.conns, s.ids = append(s.conns, conn), append(s.ids, id)
	}
	s.start()
	return s, nil
}

func (s *swarm) start() {
	for i := range s.conns {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.read(i)
		}()
	}
}

func (s *swarm) close() {
	for _, c := range s.conns {
		c.Close(websocket.StatusNormalClosure, "")
	}
	s.wg.Wait()
}

var (
	benchMethod = []byte(`"notifications/bench"`)
	rttRequest  = []byte(`"method":"tools/list"`)
	rttResult   = []byte(`"result"`)
	tField      = []byte(`"t":`)
	seqField    = []byte(`,"seq":`)
)

func (s *swarm) read(i int) {
	ctx := context.Background()
	seen := 0
	var lastSeq int64
	for {
		_, data, err := s.conns[i].Read(ctx)
		if err != nil {
			return
		}
		switch {
		case bytes.Contains(data, benchMethod):
			now := time.Now().UnixNano()
			if s.checkSeqs {
				if seq, ok := intAfter(data, seqField); ok {
					if lastSeq != 0 && seq != lastSeq+1 {
						s.gaps.Add(1)
					}
					lastSeq = seq
				}
			}
			if seen++; seen%s.sampleRate == 0 {
				if sent, ok := intAfter(data, tField); ok {
					s.samples[i] = append(s.samples[i], time.Duration(now-sent))
				}
			}
			s.counts[i].Add(1)
			if i == 0 {
				<-s.window
			}
		case i == 1 && bytes.Contains(data, rttRequest):
			id, _ := stringAfter(data, []byte(`"id":"`))
			resp := `{"protocol":"mcp-x/v0","id":"re-` + id + `","ts":"2026-01-01T00:00:00Z","from":"p001","to":["p000"],"kind":"mcp","correlation_id":"` + id + `","payload":{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}}`
			s.conns[1].Write(ctx, websocket.MessageText, []byte(resp))
		case i == 0 && bytes.Contains(data, rttResult):
			s.replies <- struct{}{}
		}
	}
}

func intAfter(data, key []byte) (int64, bool) {
	i := bytes.Index(data, key)
	if i < 0 {
		return 0, false
	}
	rest := data[i+len(key):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return v, err == nil
}

func stringAfter(data, key []byte) (string, bool) {
	i := bytes.Index(data, key)
	if i < 0 {
		return "", false
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return string(rest[:j]), true
}

type fanResult struct {
	deliveries     int64
	rate           float64
	cpu            float64 // seconds of the server's CPU over the phase
	cpuPerDelivery float64 // seconds
	p50, p99       time.Duration
}

// fanOut has participant 0 broadcast for d with window envelopes in flight
// and measures deliveries, latency and the server processes' CPU time.
func (s *swarm) fanOut(pids []int, d time.Duration, window int) (*fanResult, error) {
	s.window = make(chan struct{}, window)
	cpu0, err := cpuOf(pids)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ctx := context.Background()
	sent := int64(0)
	for time.Since(start) < d {
		s.window <- struct{}{}
		sent++
		frame := `{"protocol":"mcp-x/v0","id":"b-` + strconv.FormatInt(sent, 10) + `","ts":"2026-01-01T00:00:00Z","from":"p000","kind":"mcp","payload":` +
			benchPayload(time.Now().UnixNano(), int(sent)) + `}`
		if err := s.conns[0].Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
	}
	// Wait until every participant has every envelope.
	want := sent * int64(len(s.conns))
	deadline := time.Now().Add(30 * time.Second)
	var got int64
	for {
		got = 0
		for i := range s.counts {
			got += s.counts[i].Load()
		}
		if got >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu1, err := cpuOf(pids)
	if err != nil {
		return nil, err
	}
	if got < want {
		var short []string
		for i := range s.counts {
			if c := s.counts[i].Load(); c != sent {
				short = append(short, fmt.Sprintf("%s:%d", s.ids[i], c))
			}
		}
		return nil, fmt.Errorf("fan-out: %d of %d deliveries arrived (sent %d; short: %v)", got, want, sent, short)
	}
	if g := s.gaps.Load(); g > 0 {
		return nil, fmt.Errorf("fan-out: %d envelopes arrived out of seq order", g)
	}
	r := &fanResult{deliveries: got, rate: float64(got) / elapsed.Seconds(), cpu: cpu1 - cpu0}
	r.cpuPerDelivery = r.cpu / float64(got)
	var all []time.Duration
	for _, samples := range s.samples {
		all = append(all, samples...)
	}
	r.p50, r.p99 = percentiles(all)
	return r, nil
}

// directed times n sequential request/response round trips from
// participant 0 to participant 1.
func (s *swarm) directed(n int) (p50, p99 time.Duration, err error) {
	ctx := context.Background()
	samples := make([]time.Duration, 0, n)
	for k := 0; k < n; k++ {
		req := `{"protocol":"mcp-x/v0","id":"rq-` + strconv.Itoa(k) + `","ts":"2026-01-01T00:00:00Z","from":"p000","to":["p001"],"kind":"mcp","payload":{"jsonrpc":"2.0","id":` + strconv.Itoa(k) + `,"method":"tools/list","params":{}}}`
		start := time.Now()
		if err := s.conns[0].Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			return 0, 0, err
		}
		select {
		case <-s.replies:
		case <-time.After(10 * time.Second):
			return 0, 0, fmt.Errorf("round trip %d: %w", k, errTimeout)
		}
		samples = append(samples, time.Since(start))
	}
	p50, p99 = percentiles(samples)
	return p50, p99, nil
}
