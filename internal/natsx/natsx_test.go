package natsx_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
)

func TestNATS_ConnectFailsFastWhenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = natsx.Connect(context.Background(), url, natsx.Options{ConnectTimeout: 2 * time.Second})
	if !errors.Is(err, natsx.ErrUnreachable) {
		t.Fatalf("err %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestNATS_UpFollowsTheServer(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := natsx.Connect(ctx, s.URL(), natsx.Options{ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Up() {
		t.Fatal("not up after Connect")
	}
	s.Stop()
	for {
		up, since, changed := c.Status()
		if !up {
			if since.IsZero() {
				t.Fatal("down without a time")
			}
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("never saw the link go down")
		}
	}
	s.Restart()
	if err := c.WaitUp(ctx); err != nil {
		t.Fatalf("never came back: %v", err)
	}
	if _, err := c.JS.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream after the restart: %v", err)
	}
}

// records is a slog.Handler that keeps every record, for tests.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

func (h *records) snapshot() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.recs...)
}

// Closing the connection on purpose is no lost link: nothing is logged at
// warning level, and Close returns only once the client's last callback
// has run, so that nothing about the connection is logged after it.
func TestNATS_CloseIsNoLostLink(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &records{}
	c, err := natsx.Connect(ctx, s.URL(), natsx.Options{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	recs := h.snapshot()
	closed := false
	for _, r := range recs {
		if r.Level >= slog.LevelWarn {
			t.Errorf("logged on Close: %s %q", r.Level, r.Message)
		}
		closed = closed || r.Message == "NATS connection closed"
	}
	if !closed {
		t.Errorf("Close returned before the client's closed callback; records %d", len(recs))
	}
	if c.Up() {
		t.Error("up after Close")
	}
	c.Close() // a second Close is harmless
}
