package usdrate

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/payments"
)

// DefaultTTL is how long a rate is used before it is fetched again: a
// minute, in which bitcoin rarely moves by a tenth of the 2% a client
// tolerates, and few enough fetches that a free public endpoint's rate
// limits are never reached.
const DefaultTTL = 60 * time.Second

// DefaultMaxBytes bounds a source's answer: a price endpoint answers a
// few hundred bytes; a source that sends more is not one.
const DefaultMaxBytes = 64 << 10

// Options configure a Source. URL is required; zero values of the others
// take the defaults beside them.
type Options struct {
	// URL is the endpoint, http or https, that answers JSON.
	URL string
	// Pointer is the RFC 6901 JSON pointer to the price in the answer,
	// e.g. /data/amount; "" is the whole answer.
	Pointer string
	// TTL is how long a rate fetched is used (default DefaultTTL).
	TTL time.Duration
	// MaxBytes bounds the answer (default DefaultMaxBytes).
	MaxBytes int64
	// Fetcher fetches it (default outbound.New with its defaults: public
	// addresses only, 10 s for the whole fetch).
	Fetcher *outbound.Fetcher
	// Now is the clock of the TTL (default time.Now).
	Now func() time.Time
}

// Source is a rate source: payments.Rates. Safe for concurrent use.
type Source struct {
	opts Options
	ptr  pointer

	mu      sync.Mutex
	rate    *big.Rat  // the last rate fetched, nil before the first
	expires time.Time // when rate is too old to use
	flight  *fetch    // the fetch under way, nil when none is
}

var _ payments.Rates = (*Source)(nil)

// fetch is one fetch of the rate, which every caller that asks while it
// runs waits for.
type fetch struct {
	done chan struct{} // closed once rate or err is set
	rate *big.Rat
	err  error
	// waiters counts the callers waiting for it (what the tests of
	// sharing wait on).
	waiters atomic.Int32
}

// New checks opts and returns their Source. Nothing is fetched before
// the first USDPerBTC.
func New(opts Options) (*Source, error) {
	if opts.URL == "" {
		return nil, errors.New("usdrate: no URL")
	}
	p, err := parsePointer(opts.Pointer)
	if err != nil {
		return nil, err
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Fetcher == nil {
		opts.Fetcher = outbound.New(outbound.Options{})
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := opts.Fetcher.CheckURL(opts.URL); err != nil {
		return nil, fmt.Errorf("usdrate: %w", err)
	}
	return &Source{opts: opts, ptr: p}, nil
}

// USDPerBTC is the price of one bitcoin in US dollars: the one fetched
// less than TTL ago, else fetched now. Callers that ask while a fetch
// runs wait for it rather than start their own; one whose ctx ends first
// stops waiting, and the fetch goes on for the others (the Fetcher's
// timeout bounds it). An error is not kept: the next caller fetches
// again.
func (s *Source) USDPerBTC(ctx context.Context) (*big.Rat, error) {
	s.mu.Lock()
	if s.rate != nil && s.opts.Now().Before(s.expires) {
		r := s.rate
		s.mu.Unlock()
		return new(big.Rat).Set(r), nil
	}
	f := s.flight
	if f == nil {
		f = &fetch{done: make(chan struct{})}
		s.flight = f
		// Detached from the first caller: the others wait for it too.
		go s.run(context.WithoutCancel(ctx), f)
	}
	f.waiters.Add(1)
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return new(big.Rat).Set(f.rate), nil
}

// run fetches the rate for f and keeps it for the TTL.
func (s *Source) run(ctx context.Context, f *fetch) {
	rate, err := s.get(ctx)
	s.mu.Lock()
	if err == nil {
		s.rate, s.expires = rate, s.opts.Now().Add(s.opts.TTL)
	}
	s.flight = nil
	s.mu.Unlock()
	f.rate, f.err = rate, err
	close(f.done)
}

// get fetches and reads the rate.
func (s *Source) get(ctx context.Context) (*big.Rat, error) {
	res, err := s.opts.Fetcher.Get(ctx, outbound.Request{URL: s.opts.URL, MaxBytes: s.opts.MaxBytes,
		Accept: []string{"application/json", "application/*+json", "text/plain"}})
	if err != nil {
		return nil, fmt.Errorf("usdrate: fetch the rate: %w", err)
	}
	rate, err := parseRate(res.Body, s.ptr)
	if err != nil {
		return nil, fmt.Errorf("usdrate: %.200s: %w", s.opts.URL, err)
	}
	return rate, nil
}
