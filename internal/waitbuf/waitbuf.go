// Package waitbuf is a buffer that a component writes to and a test waits
// on. What a process prints, or what a component logs, is the test's
// handshake with it: the test returns the moment the line is there, instead
// of sleeping until it has probably been written.
package waitbuf

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
)

// Buffer collects what is written to it. The zero value is ready; its
// methods are safe for concurrent use.
type Buffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	grew chan struct{} // closed, and forgotten, by the next write
}

// Write appends p and wakes every waiter.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.grew != nil {
		close(b.grew)
		b.grew = nil
	}
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitFor returns once what was written contains every one of want, or
// with an error that quotes what was written when ctx ends first.
func (b *Buffer) WaitFor(ctx context.Context, want ...string) error {
	for {
		b.mu.Lock()
		text := b.buf.String()
		all := true
		for _, w := range want {
			all = all && strings.Contains(text, w)
		}
		if all {
			b.mu.Unlock()
			return nil
		}
		if b.grew == nil {
			b.grew = make(chan struct{})
		}
		grew := b.grew
		b.mu.Unlock()
		select {
		case <-grew:
		case <-ctx.Done():
			return fmt.Errorf("never written %q (%w); written:\n%s", want, ctx.Err(), text)
		}
	}
}

// Await is WaitFor for a test: it fails t when d, scaled as every test
// deadline is (testwait.Timeout), passes first.
func (b *Buffer) Await(t testing.TB, d time.Duration, want ...string) {
	t.Helper()
	ctx, cancel := testwait.Context(t, d)
	defer cancel()
	if err := b.WaitFor(ctx, want...); err != nil {
		t.Fatal(err)
	}
}

// Logger is a debug-level text logger that writes to b.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
