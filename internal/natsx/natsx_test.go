package natsx_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/natsx"
	"github.com/cvmgo/cvm/internal/natsx/natstest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/nats-io/nats.go"
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
	ctx, cancel := testwait.Context(t, 60*time.Second)
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

// connectRecorded connects to s with a logger that keeps every record.
func connectRecorded(ctx context.Context, t *testing.T, s *natstest.Server) (*natsx.Conn, *records) {
	t.Helper()
	h := &records{}
	c, err := natsx.Connect(ctx, s.URL(), natsx.Options{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	return c, h
}

// Closing the connection on purpose is no lost link: nothing is logged at
// warning level, and Close returns only once the client's last callback
// has run, so that nothing about the connection is logged after it.
func TestNATS_CloseIsNoLostLink(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	c, h := connectRecorded(ctx, t, s)
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

// A subscription that falls behind its pending limits loses messages:
// the client reports it through the connection's logger, with the
// subject and the count, not on stderr.
func TestNATS_SlowConsumerIsLogged(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := testwait.Context(t, 60*time.Second)
	defer cancel()
	c, h := connectRecorded(ctx, t, s)
	defer c.Close()
	stall := make(chan struct{})
	taken := make(chan struct{}, 1)
	sub, err := c.NC.Subscribe("slow", func(*nats.Msg) {
		select {
		case taken <- struct{}{}:
		default:
		}
		<-stall
	})
	if err != nil {
		t.Fatal(err)
	}
	defer close(stall) // before Close: the callback must return
	if err := sub.SetPendingLimits(2, -1); err != nil {
		t.Fatal(err)
	}
	if err := c.NC.Publish("slow", nil); err != nil {
		t.Fatal(err)
	}
	<-taken // the callback holds the first one
	for range 10 {
		if err := c.NC.Publish("slow", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.NC.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		for _, r := range h.snapshot() {
			subject := ""
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "subject" {
					subject = a.Value.String()
				}
				return true
			})
			if r.Level == slog.LevelWarn && strings.Contains(r.Message, "dropped") && subject == "slow" {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no log line for the dropped messages; records %d", len(h.snapshot()))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
