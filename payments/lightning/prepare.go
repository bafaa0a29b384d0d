package lightning

import (
	"context"
	"sync"
	"time"

	"github.com/cvmgo/cvm/payments"
)

// maxPreparedPrices bounds the prices a Processor keeps invoices ready
// for: a server with computed prices (a Pricer) could otherwise ask for
// one invoice ahead per amount it ever quoted.
const maxPreparedPrices = 64

// prepared are the invoices a Processor made ahead of the requests that
// will hand them out: a priced request's payment_required then leaves
// without waiting for the wallet's make_invoice (one round trip to the
// wallet through the relays, a sixth of a paid call on loopback). Each
// is made on a goroutine of the Processor's, which Close ends and waits
// for.
type prepared struct {
	mu      sync.Mutex
	ready   map[priceKey][]payments.Invoice
	making  map[priceKey]int
	closed  bool
	ctx     context.Context // ended by Close
	cancel  context.CancelFunc
	running sync.WaitGroup
}

// priceKey is what an invoice made ahead must match to be handed out.
type priceKey struct {
	msat        int64
	description string
}

// take hands out an invoice made ahead for k, if one is fresh enough:
// nine tenths of its TTL left.
func (p *Processor) take(k priceKey) (payments.Invoice, bool) {
	pr := &p.prep
	pr.mu.Lock()
	defer pr.mu.Unlock()
	now := p.opts.Now()
	for invs := pr.ready[k]; len(invs) > 0; invs = pr.ready[k] {
		inv := invs[0]
		pr.ready[k] = invs[1:]
		if len(pr.ready[k]) == 0 {
			delete(pr.ready, k)
		}
		if inv.ExpiresAt.Sub(now) >= p.opts.TTL*9/10 {
			return inv, true
		}
	}
	return payments.Invoice{}, false
}

// prepare makes, in the background, invoices for k up to the number the
// options ask for.
func (p *Processor) prepare(k priceKey) {
	pr := &p.prep
	want := p.opts.Prepared
	if want <= 0 {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed || len(pr.ready[k])+pr.making[k] >= want {
		return
	}
	if _, known := pr.ready[k]; !known && pr.making[k] == 0 && len(pr.ready)+len(pr.making) >= maxPreparedPrices {
		return
	}
	if pr.ctx == nil {
		pr.ctx, pr.cancel = context.WithCancel(context.Background())
		pr.ready, pr.making = map[priceKey][]payments.Invoice{}, map[priceKey]int{}
	}
	pr.making[k]++
	pr.running.Go(func() {
		ctx, cancel := context.WithTimeout(pr.ctx, time.Minute)
		defer cancel()
		inv, err := p.w.MakeInvoice(ctx, k.msat, k.description, p.opts.TTL)
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if pr.making[k]--; pr.making[k] == 0 {
			delete(pr.making, k)
		}
		if err != nil {
			p.opts.Logger.Debug("lightning: could not make an invoice ahead; the next request makes its own", "err", err)
			return
		}
		if !pr.closed {
			pr.ready[k] = append(pr.ready[k], inv)
		}
	})
}

// Close stops making invoices ahead and waits for those being made. The
// Processor still works after it, making each invoice when asked.
func (p *Processor) Close() error {
	pr := &p.prep
	pr.mu.Lock()
	pr.closed = true
	if pr.cancel != nil {
		pr.cancel()
	}
	pr.mu.Unlock()
	pr.running.Wait()
	return nil
}
