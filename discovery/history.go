package discovery

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"fiatjaf.com/nostr"
)

// History remembers how servers answered this user's calls: the last
// MaxCallsPerServer outcomes of each of at most maxRecords servers. Choose
// prefers the fast and avoids those that just failed; package reputation
// reads a server's success rate and median latency from it. It lives in a
// file of its own (by default history.json in the user's cache directory,
// mode 0600); being a cache, a missing or unreadable file is an empty
// history. It is safe for concurrent use.
type History struct {
	path string
	mu   sync.Mutex
	recs map[string]*Record
	// added are the outcomes recorded since the file was read: Save adds
	// them to what the file holds then, so that two processes saving in
	// turn (a proxy and a cvm call) keep each other's calls.
	added map[string][]Outcome
}

// Record is what the history knows of one server: its last calls, oldest
// first.
type Record struct {
	Calls []Outcome `json:"calls"`
}

// Outcome is one call to a server.
type Outcome struct {
	At time.Time `json:"at"`
	OK bool      `json:"ok"`
	// Latency is how long a successful call took to be answered.
	Latency time.Duration `json:"latency,omitempty"`
}

// MaxCallsPerServer is how many calls the history keeps per server: enough
// for a success rate and a median to mean something, few enough that an
// old run of failures is forgotten once the server has mended.
const MaxCallsPerServer = 50

// maxRecords bounds the history: the servers called least recently are
// dropped.
const maxRecords = 1000

// OpenHistory reads the history at path. An empty path gives a history kept
// in memory only.
func OpenHistory(path string) *History {
	return &History{path: path, recs: readHistory(path), added: map[string][]Outcome{}}
}

func readHistory(path string) map[string]*Record {
	recs := map[string]*Record{}
	if path == "" {
		return recs
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return recs
	}
	var read map[string]*Record
	if json.Unmarshal(data, &read) != nil {
		return recs
	}
	for k, r := range read {
		if _, err := nostr.PubKeyFromHex(k); err == nil && r != nil && len(r.Calls) > 0 {
			r.Calls = r.Calls[max(0, len(r.Calls)-MaxCallsPerServer):]
			recs[k] = r
		}
	}
	return recs
}

// Get returns the record of pk (the zero Record when there is none).
func (h *History) Get(pk nostr.PubKey) Record {
	if h == nil {
		return Record{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.recs[pk.Hex()]; r != nil {
		return Record{Calls: slices.Clone(r.Calls)}
	}
	return Record{}
}

// Failed records a failed call to pk at t.
func (h *History) Failed(pk nostr.PubKey, t time.Time) {
	h.add(pk, Outcome{At: t})
}

// Succeeded records a call to pk that was answered in d, at t.
func (h *History) Succeeded(pk nostr.PubKey, d time.Duration, t time.Time) {
	h.add(pk, Outcome{At: t, OK: true, Latency: d})
}

// Record records a call to pk that took d, by its error: a success when
// err is nil, a failure when the server did not answer or answered with an
// error, nothing for invalid arguments (-32602), which are the caller's
// and would be refused anywhere, nor for a payment the caller declined.
func (h *History) Record(pk nostr.PubKey, d time.Duration, err error, at time.Time) {
	_, declined := callerDeclined(err)
	switch {
	case err == nil:
		h.Succeeded(pk, d, at)
	case failover(err) && !declined:
		h.Failed(pk, at)
	}
}

func (h *History) add(pk nostr.PubKey, o Outcome) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	k := pk.Hex()
	appendCall(h.recs, k, o)
	h.added[k] = append(h.added[k], o)
}

// appendCall adds o to the record of k, keeping it within
// MaxCallsPerServer.
func appendCall(recs map[string]*Record, k string, o Outcome) {
	r := recs[k]
	if r == nil {
		r = &Record{}
		recs[k] = r
	}
	r.Calls = append(r.Calls, o)
	if len(r.Calls) > MaxCallsPerServer {
		r.Calls = slices.Delete(r.Calls, 0, len(r.Calls)-MaxCallsPerServer)
	}
}

// Save writes the history to its file, atomically, readable only by its
// owner: what the file holds now (another process may have saved since
// this one read it) and the calls recorded here since.
func (h *History) Save() error {
	if h == nil || h.path == "" {
		return nil
	}
	h.mu.Lock()
	recs := readHistory(h.path)
	for k, calls := range h.added {
		for _, o := range calls {
			appendCall(recs, k, o)
		}
	}
	for len(recs) > maxRecords {
		var oldest string
		var at time.Time
		for k, r := range recs {
			if last := r.Calls[len(r.Calls)-1].At; oldest == "" || last.Before(at) {
				oldest, at = k, last
			}
		}
		delete(recs, oldest)
	}
	h.recs, h.added = recs, map[string][]Outcome{}
	data, err := json.MarshalIndent(recs, "", "  ")
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return err
	}
	// CreateTemp makes the file 0600.
	tmp, err := os.CreateTemp(filepath.Dir(h.path), ".history-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), h.path)
}

// Path is the history's file ("" for one kept in memory).
func (h *History) Path() string { return h.path }

// LastFailure is when a call last failed (zero if none did).
func (r Record) LastFailure() time.Time { return r.last(false) }

// LastSuccess is when a call last succeeded (zero if none did).
func (r Record) LastSuccess() time.Time { return r.last(true) }

func (r Record) last(ok bool) time.Time {
	for _, o := range slices.Backward(r.Calls) {
		if o.OK == ok {
			return o.At
		}
	}
	return time.Time{}
}

// Stats are the number of calls remembered, how many succeeded, and the
// median latency of those (zero without one).
func (r Record) Stats() (calls, succeeded int, p50 time.Duration) {
	var lat []time.Duration
	for _, o := range r.Calls {
		if o.OK {
			lat = append(lat, o.Latency)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		p50 = lat[(len(lat)-1)/2]
	}
	return len(r.Calls), len(lat), p50
}
