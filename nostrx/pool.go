package nostrx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
)

// Publish outcomes. A *PublishError wraps exactly one of them.
var (
	// ErrUnheard means a relay accepted the event as valid but nobody was
	// subscribed to it ("mute:", khatru's answer to an ephemeral event that
	// matches no live subscription). Retrying does not help.
	ErrUnheard = errors.New("event was valid but nobody was listening for it")

	// ErrRejected means every relay that answered refused the event.
	ErrRejected = errors.New("event rejected by every relay that answered")

	// ErrUnreachable means no relay answered before the deadline.
	ErrUnreachable = errors.New("no relay answered")

	// ErrNoRelays is returned when a pool has no relay to talk to.
	ErrNoRelays = errors.New("no relays configured")

	// ErrPoolClosed is returned by a pool that has been closed.
	ErrPoolClosed = errors.New("relay pool closed")
)

// PoolOptions configure a Pool. Zero durations take the defaults beside them.
type PoolOptions struct {
	// Relays are the websocket URLs to use.
	Relays []string

	// Signer answers NIP-42 AUTH challenges. Without one, challenges are
	// ignored and relays that require AUTH refuse what needs it.
	Signer nostr.Signer

	// PublishTimeout bounds one attempt to get an OK from one relay
	// (default 10 s). A publish makes at most PublishAttempts attempts per
	// relay (default 2: the second after a reconnect or an AUTH).
	PublishTimeout  time.Duration
	PublishAttempts int

	// ReconnectMin and ReconnectMax bound the reconnect backoff (default
	// 250 ms and 30 s; each failure doubles it, with jitter).
	ReconnectMin time.Duration
	ReconnectMax time.Duration

	// ResubscribeOverlap is how far before the last event seen a
	// subscription resumes after a reconnect (default 10 s). Deduplication
	// absorbs the overlap; without it, events stored during a short outage
	// would be lost.
	ResubscribeOverlap time.Duration

	// PingInterval is how often an idle connection is probed (default 30 s);
	// a relay that does not answer a ping within PingTimeout (10 s) is
	// dropped and redialled, so a half-open TCP connection cannot hold
	// traffic hostage.
	PingInterval time.Duration
	PingTimeout  time.Duration

	Logger *slog.Logger
}

func (o PoolOptions) withDefaults() PoolOptions {
	d := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	d(&o.PublishTimeout, 10*time.Second)
	d(&o.ReconnectMin, 250*time.Millisecond)
	d(&o.ReconnectMax, 30*time.Second)
	d(&o.ResubscribeOverlap, 10*time.Second)
	d(&o.PingInterval, 30*time.Second)
	d(&o.PingTimeout, 10*time.Second)
	if o.PublishAttempts <= 0 {
		o.PublishAttempts = 2
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Pool is a set of relay connections used as one: events are published to
// every relay, and subscriptions receive each matching event once, whichever
// relay delivers it. Connections are dialled in the background, redialled
// with backoff when they drop, and their subscriptions resumed.
//
// Every event a Subscription delivers has a valid id and signature and
// matches one of the subscription's filters: relays are not trusted to
// check either.
//
// A Pool is safe for concurrent use. Close releases it.
type Pool struct {
	opts   PoolOptions
	relays []*relayConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool // guarded by mu; once set, no goroutine joins wg
	subs   map[string]*Subscription
	nextID int
}

// spawn runs f in a goroutine the pool owns, unless the pool is closed.
// Adding to the WaitGroup under mu, and never after Close set closed, keeps
// Add from racing with Close's Wait.
func (p *Pool) spawn(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Go(f)
	return true
}

// NewPool starts connecting to every relay of opts and returns at once.
func NewPool(opts PoolOptions) *Pool {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{opts: opts, ctx: ctx, cancel: cancel, subs: make(map[string]*Subscription)}
	seen := map[string]bool{}
	for _, u := range opts.Relays {
		u = NormalizeRelayURL(u)
		if u == "" || seen[u] {
			continue
		}
		seen[u] = true
		rc := newRelayConn(p, u)
		p.relays = append(p.relays, rc)
		p.spawn(func() { rc.run(ctx) })
	}
	return p
}

// NormalizeRelayURL trims a relay URL and its trailing slash, adding ws://
// for a bare loopback host and wss:// for any other bare host.
func NormalizeRelayURL(u string) string {
	u = strings.TrimSpace(u)
	if u == "" {
		return ""
	}
	if !strings.Contains(u, "://") {
		if strings.HasPrefix(u, "127.") || strings.HasPrefix(u, "localhost") || strings.HasPrefix(u, "[::1]") {
			u = "ws://" + u
		} else {
			u = "wss://" + u
		}
	}
	return strings.TrimRight(u, "/")
}

// Relays returns the URLs the pool uses.
func (p *Pool) Relays() []string {
	out := make([]string, len(p.relays))
	for i, rc := range p.relays {
		out[i] = rc.url
	}
	return out
}

// Close closes every connection and subscription and waits for the pool's
// goroutines to exit.
func (p *Pool) Close() error {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	subs := make([]*Subscription, 0, len(p.subs))
	for _, s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
	p.wg.Wait()
	return nil
}

// RelayResult is what one relay made of a publish.
type RelayResult struct {
	URL    string
	OK     bool   // the relay accepted the event
	Reason string // the relay's OK message, if it answered
	Err    error  // why there is no answer, if it did not
}

// PublishError describes a publish that no relay accepted. It wraps
// ErrUnheard, ErrRejected or ErrUnreachable, in that order of precedence.
type PublishError struct {
	Results []RelayResult
}

func (e *PublishError) Error() string {
	var parts []string
	for _, r := range e.Results {
		switch {
		case r.Err != nil:
			parts = append(parts, fmt.Sprintf("%s: %v", r.URL, r.Err))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s", r.URL, r.Reason))
		}
	}
	return fmt.Sprintf("%v (%s)", e.Unwrap(), strings.Join(parts, "; "))
}

func (e *PublishError) Unwrap() error {
	rejected := false
	for _, r := range e.Results {
		if r.Err == nil && strings.HasPrefix(r.Reason, "mute:") {
			return ErrUnheard
		}
		if r.Err == nil && !r.OK {
			rejected = true
		}
	}
	if rejected {
		return ErrRejected
	}
	return ErrUnreachable
}

// Publish sends evt to every relay and returns as soon as one accepts it;
// the remaining relays still get it, in the background, within the pool's
// publish timeout. If none accepts, the *PublishError says what each relay
// answered. The call never outlives ctx.
func (p *Pool) Publish(ctx context.Context, evt nostr.Event) error {
	if len(p.relays) == 0 {
		return ErrNoRelays
	}
	if p.ctx.Err() != nil {
		return ErrPoolClosed
	}
	frame, err := nostr.EventEnvelope{Event: evt}.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	// The background part must survive the caller's return, but not the pool.
	deadline := time.Now().Add(p.opts.PublishTimeout * time.Duration(p.opts.PublishAttempts))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	bg, cancel := context.WithDeadline(p.ctx, deadline)
	results := make(chan RelayResult, len(p.relays))
	started := p.spawn(func() {
		var wg sync.WaitGroup
		for _, rc := range p.relays {
			wg.Go(func() { results <- rc.publish(bg, evt.ID, frame) })
		}
		wg.Wait()
		cancel()
	})
	if !started {
		cancel()
		return ErrPoolClosed
	}

	var all []RelayResult
	for range p.relays {
		select {
		case r := <-results:
			if r.OK {
				return nil
			}
			all = append(all, r)
		case <-ctx.Done():
			for _, rc := range p.relays {
				if !hasResult(all, rc.url) {
					all = append(all, RelayResult{URL: rc.url, Err: context.Cause(ctx)})
				}
			}
			return &PublishError{Results: all}
		}
	}
	return &PublishError{Results: all}
}

func hasResult(rs []RelayResult, url string) bool {
	for _, r := range rs {
		if r.URL == url {
			return true
		}
	}
	return false
}

// Subscription delivers the events matching its filters, from every relay of
// the pool, each event once.
type Subscription struct {
	pool    *Pool
	id      string
	filters []nostr.Filter // an event matching any of them is delivered
	events  chan nostr.Event
	done    chan struct{}
	once    sync.Once
	ready   chan struct{} // closed at the first EOSE from any relay
	eose    sync.Once
	// complete is closed once every relay of the pool has sent EOSE.
	complete chan struct{}
	eoseFrom map[string]bool // guarded by mu

	sending sync.RWMutex // held for reading while an event is handed over

	mu       sync.Mutex
	seen     *idRing
	lastSeen nostr.Timestamp
}

// Subscribe opens a subscription on every relay. Events arrive on
// Events() until the subscription or the pool is closed. buffer is the
// channel capacity (0 picks 256); a consumer that falls behind slows the
// relays' reads, it never loses events.
func (p *Pool) Subscribe(filter nostr.Filter, buffer int) *Subscription {
	return p.SubscribeFilters([]nostr.Filter{filter}, buffer)
}

// SubscribeFilters is Subscribe for the events matching any of filters,
// in one subscription (one REQ) per relay.
func (p *Pool) SubscribeFilters(filters []nostr.Filter, buffer int) *Subscription {
	if buffer <= 0 {
		buffer = 256
	}
	p.mu.Lock()
	p.nextID++
	s := &Subscription{
		pool:     p,
		id:       fmt.Sprintf("cvm-%d", p.nextID),
		filters:  slices.Clone(filters),
		events:   make(chan nostr.Event, buffer),
		done:     make(chan struct{}),
		ready:    make(chan struct{}),
		complete: make(chan struct{}),
		eoseFrom: make(map[string]bool),
		seen:     newIDRing(4096),
	}
	p.subs[s.id] = s
	p.mu.Unlock()
	for _, rc := range p.relays {
		rc.subscribe(s)
	}
	return s
}

// Events returns the channel of matching events. It is closed when the
// subscription closes.
func (s *Subscription) Events() <-chan nostr.Event { return s.events }

// Ready is closed once at least one relay has answered the subscription
// with EOSE: from then on, events published to that relay reach it. A relay
// registers a live subscription only after it has replayed stored events,
// so anything published before Ready may be missed.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Complete is closed once every relay of the pool has answered the
// subscription with EOSE: everything stored that matches has arrived.
func (s *Subscription) Complete() <-chan struct{} { return s.complete }

// markEOSE records the EOSE of one relay.
func (s *Subscription) markEOSE(relay string) {
	s.eose.Do(func() { close(s.ready) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eoseFrom[relay] {
		return // a resubscription after a reconnect
	}
	s.eoseFrom[relay] = true
	if len(s.eoseFrom) == len(s.pool.relays) {
		close(s.complete)
	}
}

// Query returns the stored events matching filter: every event that arrives
// until all relays have sent EOSE or ctx ends, each once. Relays that do not
// answer in time are left out; the error is ctx's only when none answered.
func (p *Pool) Query(ctx context.Context, filter nostr.Filter) ([]nostr.Event, error) {
	sub := p.Subscribe(filter, 0)
	defer sub.Close()
	var events []nostr.Event
	for {
		select {
		case evt := <-sub.Events():
			events = append(events, evt)
		case <-sub.Complete():
			// Events delivered before the last EOSE may still be queued.
			for {
				select {
				case evt := <-sub.Events():
					events = append(events, evt)
				default:
					return events, nil
				}
			}
		case <-ctx.Done():
			select {
			case <-sub.Ready():
				return events, nil
			default:
				return events, fmt.Errorf("no relay answered: %w", ctx.Err())
			}
		}
	}
}

// Close ends the subscription on every relay. It is idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		close(s.done)
		s.pool.mu.Lock()
		delete(s.pool.subs, s.id)
		s.pool.mu.Unlock()
		for _, rc := range s.pool.relays {
			rc.unsubscribe(s)
		}
		// done is closed, so a sender blocked in deliver gives up; taking
		// the write lock waits for every sender to leave before the close.
		s.sending.Lock()
		close(s.events)
		s.sending.Unlock()
	})
}

// resumeFilters are the filters to send after a reconnect: the original
// ones, starting a little before the last event seen or the disconnection,
// whichever is earlier. A filter of ephemeral kinds only is sent as it was:
// relays keep no such events to catch up on, so a since would only hide
// live events dated before it (a replay, a peer whose clock is behind).
func (s *Subscription) resumeFilters(disconnectedAt time.Time, overlap time.Duration) []nostr.Filter {
	fs := slices.Clone(s.filters)
	if disconnectedAt.IsZero() {
		return fs
	}
	s.mu.Lock()
	last := s.lastSeen
	s.mu.Unlock()
	from := nostr.Timestamp(disconnectedAt.Unix())
	if last != 0 && last < from {
		from = last
	}
	from -= nostr.Timestamp(overlap / time.Second)
	for i, f := range fs {
		if from > f.Since && !ephemeralOnly(f) {
			fs[i].Since = from
		}
	}
	return fs
}

// ephemeralOnly reports whether f asks for ephemeral kinds only.
func ephemeralOnly(f nostr.Filter) bool {
	if len(f.Kinds) == 0 {
		return false
	}
	for _, k := range f.Kinds {
		if !k.IsEphemeral() {
			return false
		}
	}
	return true
}

// matches reports whether evt matches one of the subscription's filters.
func (s *Subscription) matches(evt nostr.Event) bool {
	for _, f := range s.filters {
		if f.Matches(evt) {
			return true
		}
	}
	return false
}

// deliver checks, deduplicates and hands over one event from a relay. It
// reports false when the subscription is closed.
func (s *Subscription) deliver(evt nostr.Event) bool {
	s.mu.Lock()
	dup := s.seen.has(evt.ID)
	s.mu.Unlock()
	if dup || !s.matches(evt) {
		return true
	}
	if !evt.CheckID() || !evt.VerifySignature() {
		s.pool.opts.Logger.Info("dropping an event with a bad id or signature", "id", evt.ID.Hex(), "kind", int(evt.Kind))
		return true
	}
	s.mu.Lock()
	if s.seen.has(evt.ID) { // another relay won the race while we verified
		s.mu.Unlock()
		return true
	}
	s.seen.add(evt.ID)
	if evt.CreatedAt > s.lastSeen {
		s.lastSeen = evt.CreatedAt
	}
	s.mu.Unlock()
	s.sending.RLock()
	defer s.sending.RUnlock()
	select {
	case <-s.done:
		return false
	default:
	}
	select {
	case s.events <- evt:
		return true
	case <-s.done:
		return false
	}
}

// idRing remembers the last n ids: enough to absorb the same event arriving
// from several relays, with bounded memory.
type idRing struct {
	ids  []nostr.ID
	set  map[nostr.ID]struct{}
	next int
}

func newIDRing(n int) *idRing {
	return &idRing{ids: make([]nostr.ID, 0, n), set: make(map[nostr.ID]struct{}, n)}
}

func (r *idRing) has(id nostr.ID) bool { _, ok := r.set[id]; return ok }

func (r *idRing) add(id nostr.ID) {
	if len(r.ids) < cap(r.ids) {
		r.ids = append(r.ids, id)
	} else {
		delete(r.set, r.ids[r.next])
		r.ids[r.next] = id
		r.next = (r.next + 1) % len(r.ids)
	}
	r.set[id] = struct{}{}
}
