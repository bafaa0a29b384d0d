package discovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
)

// authorsPerQuery bounds the authors of one relay filter: relays limit
// filter sizes.
const authorsPerQuery = 100

// Fetch reads the announcements on pool's relays into a new catalog.
func Fetch(ctx context.Context, pool *nostrx.Pool, f Filter) (*Catalog, error) {
	c := NewCatalog()
	return c, c.Fetch(ctx, pool, f)
}

// Fetch adds the announcements on pool's relays to c. It first finds the
// servers, asking the relays to filter by schema hash (#i) or category (#t)
// when f has one, then reads all their announcements, relay lists and
// deletions. Relays that ignore tag filters only cost more traffic: c
// filters again. It returns when every relay has answered or ctx ends.
func (c *Catalog) Fetch(ctx context.Context, pool *nostrx.Pool, f Filter) error {
	first := nostr.Filter{Kinds: []nostr.Kind{contextvm.KindServerAnnouncement}}
	switch {
	case f.SchemaHash != "":
		first = nostr.Filter{Kinds: []nostr.Kind{contextvm.KindToolsList}, Tags: nostr.TagMap{"i": {f.SchemaHash}}}
	case f.Category != "":
		first = nostr.Filter{Kinds: []nostr.Kind{contextvm.KindToolsList}, Tags: nostr.TagMap{"t": {f.Category}}}
	}
	found, err := pool.Query(ctx, first)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	var authors []nostr.PubKey
	for _, e := range found {
		if !slices.Contains(authors, e.PubKey) {
			authors = append(authors, e.PubKey)
		}
	}
	return c.fetchAuthors(ctx, pool, authors)
}

// fetchAuthors reads everything announced by authors, and their deletions.
func (c *Catalog) fetchAuthors(ctx context.Context, pool *nostrx.Pool, authors []nostr.PubKey) error {
	var errs []error
	for chunk := range slices.Chunk(authors, authorsPerQuery) {
		for _, filter := range []nostr.Filter{
			{Authors: chunk, Kinds: contextvm.AnnouncementKinds},
			{Authors: chunk, Kinds: []nostr.Kind{nostr.KindDeletion}, Tags: nostr.TagMap{"k": announcementKindNames()}},
		} {
			evts, err := pool.Query(ctx, filter)
			if err != nil {
				errs = append(errs, err)
			}
			for _, e := range evts {
				c.Add(e) // what is skipped is recorded with its reason
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	return nil
}

func announcementKindNames() []string {
	names := make([]string, len(contextvm.AnnouncementKinds))
	for i, k := range contextvm.AnnouncementKinds {
		names[i] = strconv.Itoa(int(k))
	}
	return names
}

// watchOverlap is how far back a watch starts, so that what was published
// while the catalog was being fetched is not missed.
const watchOverlap = time.Minute

// Watch keeps c current until ctx ends: it follows new announcements and
// deletions on pool's relays and calls changed with each server whose
// listing may have changed (it may have gone: see Server). Relay lists are
// followed only for servers in the catalog: every Nostr user has one.
func (c *Catalog) Watch(ctx context.Context, pool *nostrx.Pool, changed func(nostr.PubKey)) error {
	since := nostr.Now() - nostr.Timestamp(watchOverlap.Seconds())
	kinds := slices.DeleteFunc(slices.Clone(contextvm.AnnouncementKinds), func(k nostr.Kind) bool { return k == contextvm.KindRelayList })
	announcements := pool.Subscribe(nostr.Filter{Kinds: kinds, Since: since}, 0)
	defer announcements.Close()
	deletions := pool.Subscribe(nostr.Filter{Kinds: []nostr.Kind{nostr.KindDeletion}, Tags: nostr.TagMap{"k": announcementKindNames()}, Since: since}, 0)
	defer deletions.Close()

	// The relay lists of the servers known, followed as servers appear.
	c.mu.Lock()
	known := slices.Collect(maps.Keys(c.servers))
	c.mu.Unlock()
	relayLists := newAuthorWatch(pool, nostr.Filter{Kinds: []nostr.Kind{contextvm.KindRelayList}, Since: since})
	defer relayLists.close()
	relayLists.add(known...)

	for {
		var evt nostr.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case evt, ok = <-announcements.Events():
		case evt, ok = <-deletions.Events():
		case evt, ok = <-relayLists.events:
		}
		if !ok {
			return errors.New("discovery: the relay pool closed")
		}
		c.mu.Lock()
		known := c.servers[evt.PubKey] != nil
		c.mu.Unlock()
		if ch, err := c.Add(evt); err != nil || !ch {
			continue
		}
		if !known {
			// What it announced before the watch began, and its relay list
			// from now on.
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c.fetchAuthors(qctx, pool, []nostr.PubKey{evt.PubKey})
			cancel()
			relayLists.add(evt.PubKey)
		}
		changed(evt.PubKey)
	}
}

// serverSettle is how long FetchServer waits for the other relays once one
// has answered: the newest announcement is usually on the first, and a
// relay that is down must not hold up every call by the whole timeout.
const serverSettle = 250 * time.Millisecond

// FetchServer reads the announcements of one server (its initialize result
// and lists; not its relay list, nor deletions, which the relays apply) on
// pool's relays. It returns when every relay has answered, serverSettle
// after the first one did, or when ctx ends; ok is false when the server
// has no usable announcement there.
func FetchServer(ctx context.Context, pool *nostrx.Pool, server nostr.PubKey) (s Server, ok bool, err error) {
	kinds := slices.DeleteFunc(slices.Clone(contextvm.AnnouncementKinds), func(k nostr.Kind) bool { return k == contextvm.KindRelayList })
	sub := pool.Subscribe(nostr.Filter{Authors: []nostr.PubKey{server}, Kinds: kinds}, 0)
	defer sub.Close()
	c := NewCatalog()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	ready := sub.Ready()
wait:
	for {
		select {
		case evt, open := <-sub.Events():
			if !open {
				break wait // the pool closed
			}
			c.Add(evt) // what cannot be used is skipped
		case <-ready:
			ready = nil
			settle.Reset(serverSettle)
		case <-sub.Complete():
			break wait
		case <-settle.C:
			break wait
		case <-ctx.Done():
			if ready != nil {
				return Server{}, false, fmt.Errorf("discovery: no relay answered: %w", context.Cause(ctx))
			}
			break wait
		}
	}
	// Events that arrived with the last EOSE may still be queued.
	for {
		select {
		case evt, open := <-sub.Events():
			if open {
				c.Add(evt)
				continue
			}
		default:
		}
		s, ok = c.Server(server)
		return s, ok, nil
	}
}
