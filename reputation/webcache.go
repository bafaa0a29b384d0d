package reputation

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/nostrx"
)

// WebTTL is how long a fetched web of trust is used before it is fetched
// again: follow lists change over weeks, and fetching 5,000 of them takes
// seconds.
const WebTTL = 12 * time.Hour

// WebCache keeps fetched webs of trust in a directory (the user's cache
// directory), one file per root, mode 0600.
type WebCache struct {
	// Dir is the directory; "" keeps nothing.
	Dir string
	// TTL is how long a web is used (default WebTTL).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// cachedWeb is a web in its file.
type cachedWeb struct {
	Root      string    `json:"root"`
	FetchedAt time.Time `json:"fetchedAt"`
	Follows   []string  `json:"follows"`
	Second    []string  `json:"second"`
	Notes     []string  `json:"notes,omitempty"`
}

// Load returns the web rooted at root: from the cache when it is younger
// than the TTL, else fetched from pool (see FetchWeb) and cached when
// complete. cached says which.
func (c WebCache) Load(ctx context.Context, pool *nostrx.Pool, root nostr.PubKey) (w *Web, cached bool, err error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = WebTTL
	}
	if w, at := c.read(root); w != nil && now().Sub(at) < ttl {
		return w, true, nil
	}
	w, err = FetchWeb(ctx, pool, root)
	if err != nil {
		return nil, false, err
	}
	if w.Complete {
		c.write(w, now())
	}
	return w, false, nil
}

func (c WebCache) path(root nostr.PubKey) string {
	return filepath.Join(c.Dir, "wot-"+root.Hex()+".json")
}

// read returns the cached web of root and when it was fetched, or nil.
func (c WebCache) read(root nostr.PubKey) (*Web, time.Time) {
	if c.Dir == "" {
		return nil, time.Time{}
	}
	data, err := os.ReadFile(c.path(root))
	if err != nil {
		return nil, time.Time{}
	}
	var cw cachedWeb
	if json.Unmarshal(data, &cw) != nil || cw.Root != root.Hex() || len(cw.Follows) > MaxFollowsPerList || len(cw.Second) > MaxWebKeys {
		return nil, time.Time{}
	}
	w := &Web{Root: root, follows: keySet(cw.Follows), second: keySet(cw.Second), Notes: cw.Notes, Complete: true}
	return w, cw.FetchedAt
}

func keySet(hexes []string) map[nostr.PubKey]struct{} {
	set := make(map[nostr.PubKey]struct{}, len(hexes))
	for _, h := range hexes {
		if pk, ok := parseKey(h); ok {
			set[pk] = struct{}{}
		}
	}
	return set
}

func hexes(set map[nostr.PubKey]struct{}) []string {
	out := make([]string, 0, len(set))
	for pk := range set {
		out = append(out, pk.Hex())
	}
	return out
}

// write caches w; being a cache, a failure only costs a fetch next time.
func (c WebCache) write(w *Web, at time.Time) {
	if c.Dir == "" {
		return
	}
	data, err := json.Marshal(cachedWeb{Root: w.Root.Hex(), FetchedAt: at, Follows: hexes(w.follows), Second: hexes(w.second), Notes: w.Notes})
	if err != nil || os.MkdirAll(c.Dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(c.Dir, ".wot-*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err != nil || cerr != nil {
		return
	}
	os.Rename(tmp.Name(), c.path(w.Root))
}
