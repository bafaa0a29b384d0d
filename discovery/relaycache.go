package discovery

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"fiatjaf.com/nostr"
)

// DefaultRelayCacheTTL is how long a looked-up relay list is used before it
// is looked up again: a server moves rarely, and a day bounds how long a
// client keeps knocking on relays it left.
const DefaultRelayCacheTTL = 24 * time.Hour

// maxCachedServers bounds a RelayCache file; the oldest entries go first.
const maxCachedServers = 1000

// maxCacheFile bounds what is read of a cache file: it is ours, but a
// damaged or planted one must not cost unbounded memory.
const maxCacheFile = 4 << 20

// RelayCache remembers, in a file of its own (by default relays.json in the
// user's cache directory), the relays Locate found in servers' relay lists,
// for TTL. Being a cache, a missing or unreadable file is an empty one, and
// a failure to write it costs only a lookup next time. Every call reads the
// file afresh, so that processes sharing it see each other's lookups; the
// last writer wins. It is safe for concurrent use.
type RelayCache struct {
	path string
	ttl  time.Duration
	now  func() time.Time
	mu   sync.Mutex              // serializes this process's read-modify-write cycles
	mem  map[string]CachedRelays // the entries when there is no file
}

// RelayCacheOptions configure a RelayCache.
type RelayCacheOptions struct {
	// TTL is how long an entry is used (default DefaultRelayCacheTTL).
	TTL time.Duration
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
}

// CachedRelays is what a RelayCache holds for one server.
type CachedRelays struct {
	Relays []string `json:"relays"`
	// From are the discovery relays the list was read on.
	From []string `json:"from"`
	// Fetched is when the list was read.
	Fetched time.Time `json:"fetched"`
}

// OpenRelayCache returns the cache kept in the file at path (created on
// first use, mode 0600: it says which servers the user talks to). An empty
// path gives a cache kept in memory for the life of the value.
func OpenRelayCache(path string, opts RelayCacheOptions) *RelayCache {
	if opts.TTL <= 0 {
		opts.TTL = DefaultRelayCacheTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &RelayCache{path: path, ttl: opts.TTL, now: opts.Now}
}

// Get returns the relays cached for server, if an entry younger than the
// TTL exists. An entry written in the future (a clock set back) counts as
// expired.
func (c *RelayCache) Get(server nostr.PubKey) (CachedRelays, bool) {
	if c == nil {
		return CachedRelays{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.load()[server.Hex()]
	if !ok || !c.fresh(e) {
		return CachedRelays{}, false
	}
	return e, true
}

func (c *RelayCache) fresh(e CachedRelays) bool {
	age := c.now().Sub(e.Fetched)
	return age >= 0 && age < c.ttl
}

// Put records the relays found for server now.
func (c *RelayCache) Put(server nostr.PubKey, relays, from []string) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	entries := c.load()
	entries[server.Hex()] = CachedRelays{Relays: slices.Clone(relays), From: slices.Clone(from), Fetched: c.now()}
	return c.save(entries)
}

// Forget drops what is cached for server: its relays did not reach it.
func (c *RelayCache) Forget(server nostr.PubKey) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	entries := c.load()
	if _, ok := entries[server.Hex()]; !ok {
		return nil
	}
	delete(entries, server.Hex())
	return c.save(entries)
}

// load reads the file; anything unreadable is an empty cache.
func (c *RelayCache) load() map[string]CachedRelays {
	entries := map[string]CachedRelays{}
	if c.path == "" {
		maps.Copy(entries, c.mem)
		return entries
	}
	f, err := os.Open(c.path)
	if err != nil {
		return entries
	}
	defer f.Close()
	var read map[string]CachedRelays
	if json.NewDecoder(io.LimitReader(f, maxCacheFile)).Decode(&read) != nil {
		return entries
	}
	for k, e := range read {
		if _, err := nostr.PubKeyFromHex(k); err == nil && len(e.Relays) > 0 {
			entries[k] = e
		}
	}
	return entries
}

// save writes entries, the expired and the oldest beyond the bound left
// out, through a temporary file renamed over the old one, so that a reader
// never sees half a file.
func (c *RelayCache) save(entries map[string]CachedRelays) error {
	for k, e := range entries {
		if !c.fresh(e) {
			delete(entries, k)
		}
	}
	if len(entries) > maxCachedServers {
		keys := slices.SortedFunc(maps.Keys(entries), func(a, b string) int { return entries[a].Fetched.Compare(entries[b].Fetched) })
		for _, k := range keys[:len(keys)-maxCachedServers] {
			delete(entries, k)
		}
	}
	if c.path == "" {
		c.mem = entries
		return nil
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
