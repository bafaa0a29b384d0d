package roomtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx"
)

// writeTimeout bounds each of the publisher's writes (scaled by testwait's
// knob): a write blocks only while the gateway's read loop holds back.
const writeTimeout = 10 * time.Second

// Publisher publishes on a participant's connection as fast as its
// acknowledgements allow, as a client that waits for its echoes does: at
// most a window of envelopes without an echo. The echo carries the
// envelope's seq and is the gateway's word that the envelope is stored;
// the crash tests kill a gateway under a Publisher and look for every
// echoed envelope in history after the restart.
//
// Publish starts it; Stop ends it and returns what was echoed. Echoes may
// be called meanwhile, from any goroutine.
type Publisher struct {
	t    testing.TB
	conn *websocket.Conn
	from string
	stop chan struct{}
	once sync.Once // stops it
	wg   sync.WaitGroup

	mu     sync.Mutex
	echoed map[string]uint64 // envelope id -> seq
	last   uint64            // the highest seq echoed
}

// Publish starts publishing notifications from participant from on conn
// (a connection that read its welcome), keeping at most window of them
// unacknowledged. An echo whose seq is not above the one before fails t.
func Publish(t testing.TB, conn *websocket.Conn, from string, window int) *Publisher {
	p := &Publisher{t: t, conn: conn, from: from, stop: make(chan struct{}), echoed: map[string]uint64{}}
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	p.wg.Go(func() { p.write(credits) })
	p.wg.Go(func() { p.readEchoes(credits) })
	t.Cleanup(p.halt) // a test that fails before Stop
	return p
}

// notification is envelope id from participant from: a log notification
// carrying n.
func notification(from, id string, n int) []byte {
	e := mcpx.Envelope{Protocol: mcpx.Protocol, ID: id, TS: "2026-01-01T00:00:00Z", From: from, Kind: mcpx.KindMCP,
		Payload: fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`, n)}
	return e.AppendJSON(nil)
}

// write sends envelope after envelope, each once a credit allows it.
func (p *Publisher) write(credits <-chan struct{}) {
	for n := 1; ; n++ {
		select {
		case <-credits:
		case <-p.stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(writeTimeout))
		err := p.conn.Write(ctx, websocket.MessageText, notification(p.from, fmt.Sprintf("d-%d", n), n))
		cancel()
		if err != nil {
			return
		}
	}
}

// readEchoes records each echo and gives its credit back.
func (p *Publisher) readEchoes(credits chan<- struct{}) {
	for {
		_, data, err := p.conn.Read(context.Background())
		if err != nil {
			return
		}
		var e mcpx.Envelope
		if json.Unmarshal(data, &e) != nil || e.From != p.from || e.Kind != mcpx.KindMCP {
			continue
		}
		p.mu.Lock()
		if e.Seq <= p.last {
			p.t.Errorf("echo seq %d after %d", e.Seq, p.last)
		}
		p.last = e.Seq
		p.echoed[e.ID] = e.Seq
		p.mu.Unlock()
		credits <- struct{}{}
	}
}

// Echoes is how many envelopes have been echoed so far.
func (p *Publisher) Echoes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.echoed)
}

// Stop stops publishing, closes the connection and waits for the
// publisher's goroutines. It returns the envelopes echoed (id -> seq) and
// the highest seq among them.
func (p *Publisher) Stop() (echoed map[string]uint64, last uint64) {
	p.halt()
	return p.echoed, p.last
}

func (p *Publisher) halt() {
	p.once.Do(func() {
		close(p.stop)
		p.conn.CloseNow()
		p.wg.Wait()
	})
}

// Unstored compares what was echoed with stored, a topic's history
// (seq -> envelope id): missing are the echoed envelopes history lacks,
// wrong those whose seq it holds under another id. Call it after Stop.
func (p *Publisher) Unstored(stored map[uint64]string) (missing, wrong []string) {
	for id, seq := range p.echoed {
		switch got, ok := stored[seq]; {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s(seq %d)", id, seq))
		case got != id:
			wrong = append(wrong, fmt.Sprintf("seq %d: echoed %s, stored %s", seq, id, got))
		}
	}
	return missing, wrong
}

// PublishOne publishes one envelope, id, as participant from on conn and
// returns the seq of its echo; other frames are skipped.
func PublishOne(ctx context.Context, conn *websocket.Conn, from, id string) (uint64, error) {
	if err := conn.Write(ctx, websocket.MessageText, notification(from, id, 0)); err != nil {
		return 0, err
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return 0, err
		}
		var e mcpx.Envelope
		if json.Unmarshal(data, &e) == nil && e.ID == id {
			return e.Seq, nil
		}
	}
}
