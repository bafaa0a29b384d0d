package lightning

import (
	"context"
	"sync"
	"time"

	"github.com/cvmgo/cvm/payments"
)

// Notifier is a wallet that announces the payments it receives (NIP-47
// notifications: payments/nwc's Client), so that a Processor settles on
// the announcement rather than on a lookup that comes later.
type Notifier interface {
	// Listen makes sure the wallet's announcements are heard from now on
	// and reports whether it makes any (false: lookups must do).
	Listen(ctx context.Context) (bool, error)
	// Received waits for the announcement of the payment of paymentHash,
	// heard since Listen reported true, and returns the invoice as the
	// wallet described it there.
	Received(ctx context.Context, paymentHash string) (payments.Invoice, error)
}

// listen makes sure the wallet's announcements are heard, if it makes
// any, and reports whether they are. A wallet that cannot be listened to
// now is looked up instead.
func (p *Processor) listen(ctx context.Context) bool {
	if p.notifier == nil {
		return false
	}
	ok, err := p.notifier.Listen(ctx)
	if err != nil {
		p.opts.Logger.Warn("lightning: not listening to the wallet's notifications; looking payments up instead", "err", err)
		return false
	}
	return ok
}

// notice is what the wait for an announcement came to.
type notice struct {
	inv payments.Invoice
	err error
}

// await waits for the announcement of the payment of hash on a goroutine
// that stop ends (and waits for).
func (p *Processor) await(ctx context.Context, hash string) (<-chan notice, func()) {
	ctx, cancel := context.WithCancel(ctx)
	heard := make(chan notice, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		inv, err := p.notifier.Received(ctx, hash)
		heard <- notice{inv, err}
	})
	return heard, func() { cancel(); wg.Wait() }
}

// listened are the invoices made while the wallet's announcements were
// heard, by payment hash, until they expire; and whether a wait for their
// payment has started.
type listened struct {
	mu    sync.Mutex
	m     map[string]*listenedInvoice
	sweep int // the size at which expired entries are next removed
}

type listenedInvoice struct {
	expires time.Time
	waited  bool
}

func (l *listened) add(hash string, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*listenedInvoice{}
	}
	if len(l.m) >= l.sweep {
		now := time.Now()
		for h, e := range l.m {
			if now.After(e.expires) {
				delete(l.m, h)
			}
		}
		l.sweep = 2*len(l.m) + 64
	}
	l.m[hash] = &listenedInvoice{expires: expires}
}

// first reports whether the invoice of hash was made while listening and
// no wait for its payment has started before.
func (l *listened) first(hash string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[hash]
	if !ok || e.waited {
		return false
	}
	e.waited = true
	return true
}
