package discovery

import (
	"slices"
	"sync"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// maxAuthorsPerFilter bounds the authors of one subscription's filter. A
// REQ naming them all would grow with the catalog, past what relays take
// in one message (64 KiB is common; an author is 67 bytes of JSON); 500
// authors are about 34 KB.
const maxAuthorsPerFilter = 500

// authorWatch follows one filter for a growing set of authors, in
// subscriptions of at most maxAuthorsPerFilter authors each. An author
// added goes into the last subscription, which alone is opened again; a
// full one is left alone. Its events arrive on events until close.
type authorWatch struct {
	pool   *nostrx.Pool
	filter nostr.Filter
	events chan nostr.Event

	chunks [][]nostr.PubKey
	subs   []*nostrx.Subscription
	known  map[nostr.PubKey]bool

	stop chan struct{}
	wg   sync.WaitGroup // the forwarders, one per subscription
}

func newAuthorWatch(pool *nostrx.Pool, filter nostr.Filter) *authorWatch {
	return &authorWatch{pool: pool, filter: filter, events: make(chan nostr.Event), known: map[nostr.PubKey]bool{}, stop: make(chan struct{})}
}

// add follows authors not followed yet. It is called by the watch's own
// goroutine only.
func (w *authorWatch) add(authors ...nostr.PubKey) {
	first := -1 // the first chunk that changed
	for _, a := range authors {
		if w.known[a] {
			continue
		}
		w.known[a] = true
		if n := len(w.chunks); n == 0 || len(w.chunks[n-1]) == maxAuthorsPerFilter {
			w.chunks = append(w.chunks, nil)
			w.subs = append(w.subs, nil)
		}
		last := len(w.chunks) - 1
		w.chunks[last] = append(w.chunks[last], a)
		if first < 0 {
			first = last
		}
	}
	if first < 0 {
		return
	}
	for i := first; i < len(w.chunks); i++ {
		if old := w.subs[i]; old != nil {
			old.Close() // its forwarder ends when its channel closes
		}
		f := w.filter
		f.Authors = slices.Clone(w.chunks[i])
		sub := w.pool.Subscribe(f, 0)
		w.subs[i] = sub
		w.wg.Go(func() { w.forward(sub) })
	}
}

// forward hands sub's events to w.events until sub closes or w stops.
func (w *authorWatch) forward(sub *nostrx.Subscription) {
	for evt := range sub.Events() {
		select {
		case w.events <- evt:
		case <-w.stop:
			return
		}
	}
}

// close ends the subscriptions and waits for their forwarders.
func (w *authorWatch) close() {
	close(w.stop)
	for _, sub := range w.subs {
		sub.Close()
	}
	w.wg.Wait()
}
