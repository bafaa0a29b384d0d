package contextvm

import (
	"context"
	"sync"
	"time"
)

// lifetime owns the work of something that has a Close: the goroutines it
// starts (Go), the timers it arms (AfterFunc) and the calls in progress on
// its callers' goroutines (enter, leave). All of it runs under ctx, which
// close cancels, and close returns only when all of it has returned.
//
// Once stop or close has been called, nothing new starts: Go and enter
// refuse, and a timer that fires does nothing. New work is admitted under
// the same lock that stop takes, so no work is ever added to the WaitGroup
// while close waits for it (the defect of a WaitGroup reused after Wait).
//
// The rule that keeps close from waiting for itself: work admitted by a
// lifetime never calls that lifetime's close, directly or through the
// owner's Close; it hands such a close to another goroutine.
type lifetime struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// newLifetime starts a lifetime whose context is a child of parent.
func newLifetime(parent context.Context) *lifetime {
	ctx, cancel := context.WithCancel(parent)
	return &lifetime{ctx: ctx, cancel: cancel}
}

// enter admits one piece of work, run by the caller: it reports false once
// the lifetime has stopped. Every enter that reports true is followed by
// one leave.
func (l *lifetime) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.wg.Add(1)
	return true
}

// leave ends the work that enter admitted.
func (l *lifetime) leave() { l.wg.Done() }

// Go runs f(ctx) on a goroutine of the lifetime and reports true, or
// reports false, and does nothing, once the lifetime has stopped.
func (l *lifetime) Go(f func(ctx context.Context)) bool {
	if !l.enter() {
		return false
	}
	go func() {
		defer l.leave()
		f(l.ctx)
	}()
	return true
}

// AfterFunc arms a timer that runs f(ctx) after d, as work of the
// lifetime, unless the lifetime has stopped by then. The timer's Stop and
// Reset work as for time.AfterFunc.
func (l *lifetime) AfterFunc(d time.Duration, f func(ctx context.Context)) *time.Timer {
	return time.AfterFunc(d, func() {
		if !l.enter() {
			return
		}
		defer l.leave()
		f(l.ctx)
	})
}

// join returns a context that ends with ctx or with the lifetime, whichever
// ends first, and the function that releases it.
func (l *lifetime) join(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// stopping reports whether stop or close has been called.
func (l *lifetime) stopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}

// stop refuses new work; what is running goes on, under a live ctx.
func (l *lifetime) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// close stops the lifetime, cancels its context and waits for its work.
func (l *lifetime) close() {
	l.stop()
	l.cancel()
	l.wg.Wait()
}
