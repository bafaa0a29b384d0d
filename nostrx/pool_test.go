package nostrx_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/keyer"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

func signed(t testing.TB, sk nostr.SecretKey, kind nostr.Kind, content string, tags ...nostr.Tag) nostr.Event {
	t.Helper()
	evt := nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Content: content, Tags: nostr.Tags(tags)}
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

func within(t testing.TB, ch <-chan nostr.Event, d time.Duration) (nostr.Event, bool) {
	t.Helper()
	select {
	case evt, ok := <-ch:
		return evt, ok
	case <-time.After(testwait.Timeout(d)):
		return nostr.Event{}, false
	}
}

func newPool(t testing.TB, opts nostrx.PoolOptions) *nostrx.Pool {
	p := nostrx.NewPool(opts)
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPool_PublishAndSubscribeAcrossRelays(t *testing.T) {
	r1, r2 := relaytest.Start(t, relay.Options{}), relaytest.Start(t, relay.Options{})
	p := newPool(t, nostrx.PoolOptions{Relays: []string{r1.URL, r2.URL}})
	me := nostr.Generate()
	sub := p.Subscribe(nostr.Filter{Kinds: []nostr.Kind{25910}, Tags: nostr.TagMap{"p": {me.Public().Hex()}}}, 0)
	defer sub.Close()

	other := nostr.Generate()
	// Once both relays have sent EOSE, both have the subscription live
	// (a relay registers it before it replays what it stores).
	<-sub.Complete()
	evt := signed(t, other, 25910, "hi", nostr.Tag{"p", me.Public().Hex()})
	if err := p.Publish(context.Background(), evt); err != nil {
		t.Fatal(err)
	}
	got, ok := within(t, sub.Events(), 5*time.Second)
	if !ok || got.ID != evt.ID {
		t.Fatalf("got %v %v", got.ID, ok)
	}
	// Both relays delivered it; the subscription yields it once.
	if dup, ok := within(t, sub.Events(), 300*time.Millisecond); ok && dup.ID == evt.ID {
		t.Fatal("the same event was delivered twice")
	}
}

func TestPool_UnheardIsDistinct(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	p := newPool(t, nostrx.PoolOptions{Relays: []string{r.URL}})
	err := p.Publish(context.Background(), signed(t, nostr.Generate(), 25910, "nobody listens"))
	var pe *nostrx.PublishError
	if !errors.Is(err, nostrx.ErrUnheard) || !errors.As(err, &pe) || len(pe.Results) != 1 {
		t.Fatalf("err = %v, want ErrUnheard with one relay result", err)
	}
}

func TestPool_RejectedIsDistinct(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	p := newPool(t, nostrx.PoolOptions{Relays: []string{r.URL}})
	evt := signed(t, nostr.Generate(), 1, "x")
	evt.CreatedAt = nostr.Now() + 100000 // the relay refuses far-future events
	evt.Sign(nostr.Generate())
	err := p.Publish(context.Background(), evt)
	if !errors.Is(err, nostrx.ErrRejected) {
		t.Fatalf("err = %v, want ErrRejected", err)
	}
}

func TestPool_DeadRelayDoesNotStallPublishing(t *testing.T) {
	good := relaytest.Start(t, relay.Options{})
	// A listener that accepts TCP and never answers the websocket handshake.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p := newPool(t, nostrx.PoolOptions{Relays: []string{"ws://" + ln.Addr().String(), good.URL}})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, signed(t, nostr.Generate(), 1, "stored")); err != nil {
		t.Fatalf("publish with one dead relay: %v", err)
	}
}

func TestPool_UnreachableFailsAtDeadline(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := newPool(t, nostrx.PoolOptions{Relays: []string{"ws://" + addr}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := p.Publish(ctx, signed(t, nostr.Generate(), 1, "x"))
	if !errors.Is(err, nostrx.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
}

func TestPool_AnswersAuthChallenges(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Auth: true})
	me := nostr.Generate()
	wrap := signed(t, nostr.Generate(), 1059, "sealed", nostr.Tag{"p", me.Public().Hex()})
	if err := r.Store().SaveEvent(wrap); err != nil {
		t.Fatal(err)
	}
	signer := keyer.NewPlainKeySigner(me)
	p := newPool(t, nostrx.PoolOptions{Relays: []string{r.URL}, Signer: signer})
	sub := p.Subscribe(nostr.Filter{Kinds: []nostr.Kind{1059}, Tags: nostr.TagMap{"p": {me.Public().Hex()}}}, 0)
	defer sub.Close()
	got, ok := within(t, sub.Events(), 5*time.Second)
	if !ok || got.ID != wrap.ID {
		t.Fatal("gift wrap not delivered after AUTH")
	}
}

// restartableRelay is a relay with a database on a fixed address, which a
// test stops and starts again.
type restartableRelay struct {
	t    *testing.T
	db   string
	addr string
	r    *relay.Server
}

// startRestartable starts a restartableRelay, and a pool that reconnects
// to it quickly.
func startRestartable(t *testing.T) (*restartableRelay, *nostrx.Pool) {
	rr := &restartableRelay{t: t, db: t.TempDir() + "/r.db", addr: "127.0.0.1:0"}
	rr.start()
	rr.addr = rr.r.Addr.String()
	t.Cleanup(func() { rr.r.Close() })
	return rr, newPool(t, nostrx.PoolOptions{Relays: []string{rr.r.URL}, ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
}

func (rr *restartableRelay) start() {
	rr.t.Helper()
	r, err := relay.Start(rr.addr, relay.Options{DBPath: rr.db})
	if err != nil {
		rr.t.Fatal(err)
	}
	rr.r = r
}

func (rr *restartableRelay) stop() { rr.r.Close() }

func TestPool_ResubscribesAfterRelayRestart(t *testing.T) {
	rr, p := startRestartable(t)
	me := nostr.Generate()
	sub := p.Subscribe(nostr.Filter{Kinds: []nostr.Kind{1059}, Tags: nostr.TagMap{"p": {me.Public().Hex()}}, Since: nostr.Now() - 5}, 0)
	defer sub.Close()
	<-sub.Ready()
	first := signed(t, nostr.Generate(), 1059, "before", nostr.Tag{"p", me.Public().Hex()})
	if err := p.Publish(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if got, ok := within(t, sub.Events(), 5*time.Second); !ok || got.ID != first.ID {
		t.Fatal("first event not delivered")
	}
	rr.stop()

	// While the relay is down, another client stores an event for us.
	missed := signed(t, nostr.Generate(), 1059, "during outage", nostr.Tag{"p", me.Public().Hex()})
	offline, err := relay.New(relay.Options{DBPath: rr.db})
	if err != nil {
		t.Fatal(err)
	}
	if err := offline.Store().SaveEvent(missed); err != nil {
		t.Fatal(err)
	}
	offline.Close()
	rr.start()
	got, ok := within(t, sub.Events(), 10*time.Second)
	if !ok || got.ID != missed.ID {
		t.Fatalf("event stored during the outage not delivered after reconnect (got %v)", got.Content)
	}
}

// signedAt is signed, dated at.
func signedAt(t testing.TB, sk nostr.SecretKey, kind nostr.Kind, at nostr.Timestamp, content string, tags ...nostr.Tag) nostr.Event {
	t.Helper()
	evt := nostr.Event{Kind: kind, CreatedAt: at, Content: content, Tags: nostr.Tags(tags)}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

// A subscription's filters are one REQ: an event matching any of them is
// delivered. A filter of ephemeral kinds only, which relays never store,
// keeps no since after a reconnect: an ephemeral event dated well before
// the last one seen (a request published again, a peer whose clock is
// behind) still arrives, while the stored kind resumes where it stopped.
func TestPool_EphemeralFilterKeepsNoSinceAfterReconnect(t *testing.T) {
	rr, p := startRestartable(t)
	me := nostr.Generate()
	to := nostr.Tag{"p", me.Public().Hex()}
	sub := p.SubscribeFilters([]nostr.Filter{
		{Kinds: []nostr.Kind{25910}, Tags: nostr.TagMap{"p": {me.Public().Hex()}}},
		{Kinds: []nostr.Kind{1059}, Tags: nostr.TagMap{"p": {me.Public().Hex()}}, Since: nostr.Now() - 5},
	}, 0)
	defer sub.Close()
	<-sub.Ready()
	deliver := func(evt nostr.Event) {
		t.Helper()
		if err := p.Publish(context.Background(), evt); err != nil {
			t.Fatalf("publish %q: %v", evt.Content, err)
		}
		if got, ok := within(t, sub.Events(), 5*time.Second); !ok || got.ID != evt.ID {
			t.Fatalf("%q not delivered (got %q)", evt.Content, got.Content)
		}
	}
	deliver(signed(t, nostr.Generate(), 1059, "stored kind", to))
	deliver(signed(t, nostr.Generate(), 25910, "ephemeral, now", to))
	deliver(signedAt(t, nostr.Generate(), 25910, nostr.Now()-60, "ephemeral, a minute old", to))
	rr.stop()
	rr.start()
	// Heard once the pool has subscribed again.
	deadline := time.Now().Add(testwait.Timeout(10 * time.Second))
	for {
		probe := signed(t, nostr.Generate(), 25910, "probe", to)
		err := p.Publish(context.Background(), probe)
		if err == nil {
			if got, ok := within(t, sub.Events(), 5*time.Second); !ok || got.ID != probe.ID {
				t.Fatalf("probe not delivered (got %q)", got.Content)
			}
			break
		}
		if !errors.Is(err, nostrx.ErrUnheard) || time.Now().After(deadline) {
			t.Fatalf("the pool did not subscribe again after the relay restarted: %v", err)
		}
	}
	deliver(signedAt(t, nostr.Generate(), 25910, nostr.Now()-60, "ephemeral, a minute old, after the reconnect", to))
}

// TestPool_PublishRacesClose: a publish that starts while the pool closes
// either completes or reports ErrPoolClosed; it never registers background
// work the closing pool has stopped waiting for (the race detector flags
// that as a WaitGroup reused before Wait returned).
func TestPool_PublishRacesClose(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	sk := nostr.Generate()
	for range 20 {
		p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
		start := make(chan struct{})
		publishing := make(chan struct{}, 4)
		done := make(chan struct{})
		for range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				for first := true; ; first = false {
					err := p.Publish(context.Background(), signed(t, sk, 1, "x"))
					if first {
						publishing <- struct{}{}
					}
					if errors.Is(err, nostrx.ErrPoolClosed) {
						return
					}
				}
			}()
		}
		close(start)
		// Close once every publisher is in its loop, so that publishes are
		// starting while the pool closes.
		for range 4 {
			<-publishing
		}
		p.Close()
		for range 4 {
			<-done
		}
	}
}

// slowAuthSigner signs everything but AUTH events at once; an AUTH event it
// holds until its context ends, then takes a while more to give up, as a
// remote signer might.
type slowAuthSigner struct {
	nostr.Signer
	asked    chan struct{} // closed when an AUTH event reaches the signer
	once     sync.Once
	returned atomic.Bool
}

func (s *slowAuthSigner) SignEvent(ctx context.Context, evt *nostr.Event) error {
	if evt.Kind != nostr.KindClientAuthentication {
		return s.Signer.SignEvent(ctx, evt)
	}
	s.once.Do(func() { close(s.asked) })
	<-ctx.Done()
	<-time.After(50 * time.Millisecond) // giving up takes a while
	s.returned.Store(true)
	return ctx.Err()
}

// Close waits for the answer to an AUTH challenge that is still under way:
// nothing the pool started outlives it.
func TestPool_CloseWaitsForAuthentication(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Auth: true})
	signer := &slowAuthSigner{Signer: keyer.NewPlainKeySigner(nostr.Generate()), asked: make(chan struct{})}
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}, Signer: signer})
	<-signer.asked
	p.Close()
	if !signer.returned.Load() {
		t.Fatal("Close returned while the AUTH answer was still running")
	}
}
