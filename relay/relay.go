package relay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/eventstore"
	"fiatjaf.com/nostr/eventstore/boltdb"
	"fiatjaf.com/nostr/eventstore/slicestore"
	"fiatjaf.com/nostr/khatru"
	"fiatjaf.com/nostr/nip11"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrDatabaseLocked is returned by New and Start when another process has
// the database at Options.DBPath open: bbolt's file lock keeps it to one.
var ErrDatabaseLocked = errors.New("relay: the database is in use by another process")

// Options configure a Relay. The zero value is a usable in-memory relay.
type Options struct {
	// DBPath is the bbolt file that stores events. Empty keeps events in
	// memory: queryable while the relay runs, gone when it closes.
	DBPath string

	// Name and Description appear in the NIP-11 document.
	Name        string
	Description string

	// Version is reported as the NIP-11 software version.
	Version string

	// Auth enables NIP-42: gift wraps (kind 1059), stored or live, reach
	// only a connection authenticated as their recipient (the "p" tag), and
	// no other answer (COUNT, a deletion's, a duplicate's) reveals them.
	Auth bool

	// GiftWrapTTL is how long stored gift wraps (kind 1059) are kept.
	// Zero means DefaultGiftWrapTTL; negative keeps them until deleted.
	GiftWrapTTL time.Duration

	Limits Limits

	// TrustForwardedFor keys per-IP limits on the X-Forwarded-For header.
	// Set it only behind a reverse proxy that sets the header itself.
	TrustForwardedFor bool

	// Logger receives the relay's logs. Nil discards them.
	Logger *slog.Logger
}

// DefaultGiftWrapTTL is how long a stored gift wrap is kept by default:
// ContextVM peers subscribe with "since" set to their start time, so a wrap
// older than a day is of no use to anyone and only costs disk.
const DefaultGiftWrapTTL = 24 * time.Hour

// Relay is an embedded Nostr relay. Its methods are safe for concurrent use.
type Relay struct {
	khatru   *khatru.Relay
	store    eventstore.Store
	opts     Options
	limits   Limits
	log      *slog.Logger
	metrics  *metrics
	conns    *connTracker
	guard    *limiter
	dispatch *dispatcher

	mux    *http.ServeMux
	ctx    context.Context // canceled by Close; parent of every connection
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
}

// New opens the store and builds a relay. The caller must Close it.
func New(opts Options) (*Relay, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	limits := opts.Limits.withDefaults()
	if opts.GiftWrapTTL == 0 {
		opts.GiftWrapTTL = DefaultGiftWrapTTL
	}

	store, err := openStore(opts.DBPath)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	r := &Relay{
		store:    store,
		opts:     opts,
		limits:   limits,
		log:      logger,
		metrics:  newMetrics(),
		dispatch: newDispatcher(),
		ctx:      ctx,
		cancel:   cancel,
	}
	r.conns = newConnTracker()
	r.guard = newLimiter(ctx, limits, &r.wg)

	kr := khatru.NewRelay()
	kr.Log = slog.NewLogLogger(logger.With("component", "khatru").Handler(), slog.LevelWarn)
	kr.MaxMessageSize = limits.MaxMessageBytes
	kr.Info = &nip11.RelayInformationDocument{
		Name:          opts.Name,
		Description:   opts.Description,
		Software:      "https://github.com/cvmgo/cvm",
		Version:       opts.Version,
		SupportedNIPs: []any{1, 9, 11, 40},
		Limitation: &nip11.RelayLimitationDocument{
			MaxMessageLength: int(limits.MaxMessageBytes),
			MaxSubscriptions: limits.MaxSubscriptions,
			MaxLimit:         limits.MaxQueryLimit,
			AuthRequired:     false,
		},
	}
	if opts.Auth {
		kr.Info.AddSupportedNIP(42)
	}
	kr.UseEventstore(store, limits.MaxQueryLimit)
	r.khatru = kr
	r.install(kr)

	if opts.GiftWrapTTL > 0 {
		r.wg.Add(1)
		go r.expireGiftWraps(ctx)
	}

	r.mux = http.NewServeMux()
	r.mux.Handle("GET /metrics", r.metrics.handler())
	r.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"ok":true}`)
	})
	return r, nil
}

func openStore(path string) (eventstore.Store, error) {
	if path == "" {
		s := &lockedStore{Store: &slicestore.SliceStore{}}
		if err := s.Init(); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("relay: create database directory: %w", err)
	}
	s := &boltdb.BoltBackend{Path: path}
	if err := s.Init(); err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			// The backend waits 2 s for the lock, then gives up.
			return nil, fmt.Errorf("%w: %s", ErrDatabaseLocked, path)
		}
		return nil, fmt.Errorf("relay: open database %s: %w", path, err)
	}
	return s, nil
}

// install plugs cvm's policies into khatru's hooks. khatru is the event
// engine here (policies, storage and replacement semantics, NIP-11, NIP-40);
// the websocket layer and live subscriptions are cvm's (conn.go,
// dispatch.go), because khatru's race under concurrent subscribe and
// broadcast, and its synchronous fan-out, cannot be fixed through its hooks.
func (r *Relay) install(kr *khatru.Relay) {
	kr.OnEvent = r.onEvent
	kr.OnEventSaved = func(ctx context.Context, evt nostr.Event) { r.metrics.stored.Inc() }
	// Stored events reach a client through the viewer (visibility.go).
	// khatru's Count is left as it is: only its websocket handler, unused
	// here, calls it; COUNT is conn.go's.
	query := kr.QueryStored
	kr.QueryStored = func(ctx context.Context, f nostr.Filter) iter.Seq[nostr.Event] {
		return r.viewerFor(ctx).visible(query(ctx, f))
	}
	// A deletion request is checked, and carried out, before it is stored:
	// khatru stores an event before the relay answers it, so a refusal
	// decided afterwards would leave the refused event stored.
	kr.StoreEvent = r.storeEvent(kr.StoreEvent)
}

// ServeHTTP serves websocket upgrades (NIP-01), NIP-11 documents, /metrics
// and /healthz.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case strings.EqualFold(req.Header.Get("Upgrade"), "websocket"):
		r.serveWebsocket(w, req)
	case strings.Contains(req.Header.Get("Accept"), "application/nostr+json"):
		w.Header().Set("Access-Control-Allow-Origin", "*")
		r.khatru.HandleNIP11(w, req)
	default:
		r.mux.ServeHTTP(w, req)
	}
}

// Close disconnects every client, stops background work and closes the store.
// It does not close listeners; Server.Close does.
func (r *Relay) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.conns.closeAll()
		r.khatru.DisableExpirationManager()
		r.wg.Wait()
		r.store.Close()
	})
	return nil
}

// Store returns the relay's event store, for inspection by tests and tools.
func (r *Relay) Store() eventstore.Store { return r.store }

// connTracker remembers live connections so that Close can end them and
// wait for their goroutines: an http.Server does not track hijacked
// connections.
type connTracker struct {
	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newConnTracker() *connTracker { return &connTracker{conns: make(map[*conn]struct{})} }

// add registers c; it reports false once the relay is closing.
func (t *connTracker) add(c *conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	t.wg.Add(1)
	return true
}

func (t *connTracker) remove(c *conn) {
	t.mu.Lock()
	if _, ok := t.conns[c]; ok {
		delete(t.conns, c)
		t.wg.Done()
	}
	t.mu.Unlock()
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := make([]*conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	t.wg.Wait()
}

// lockedStore serializes access to a store that is not safe for concurrent
// queries and writes (slicestore reads its slice without a lock). Queries
// are collected under the read lock, so a slow consumer never holds it.
type lockedStore struct {
	mu sync.RWMutex
	eventstore.Store
}

func (s *lockedStore) QueryEvents(f nostr.Filter, maxLimit int) iter.Seq[nostr.Event] {
	return func(yield func(nostr.Event) bool) {
		s.mu.RLock()
		var found []nostr.Event
		for evt := range s.Store.QueryEvents(f, maxLimit) {
			found = append(found, evt)
		}
		s.mu.RUnlock()
		for _, evt := range found {
			if !yield(evt) {
				return
			}
		}
	}
}

func (s *lockedStore) CountEvents(f nostr.Filter) (uint32, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.Store.CountEvents(f)
}

func (s *lockedStore) SaveEvent(evt nostr.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Store.SaveEvent(evt)
}

func (s *lockedStore) ReplaceEvent(evt nostr.Event) ([]nostr.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Store.ReplaceEvent(evt)
}

func (s *lockedStore) DeleteEvent(id nostr.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Store.DeleteEvent(id)
}
