package discovery

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"fiatjaf.com/nostr"
)

// History remembers how providers answered, so that a later run prefers the
// fast ones and avoids those that just failed. It lives in a file of its own
// (by default providers.json in the user's cache directory); being a cache,
// a missing or unreadable file is an empty history. It is safe for
// concurrent use.
type History struct {
	path string
	mu   sync.Mutex
	recs map[string]*Record
}

// Record is what the history knows of one server.
type Record struct {
	// LastFailure is when a call last failed; Failures counts the failures
	// since the last success.
	LastFailure time.Time `json:"lastFailure,omitzero"`
	Failures    int       `json:"failures,omitempty"`
	// Latency is a moving average of the time successful calls took.
	Latency     time.Duration `json:"latency,omitempty"`
	LastSuccess time.Time     `json:"lastSuccess,omitzero"`
}

// maxRecords bounds the history: the least recently used are dropped.
const maxRecords = 1000

// OpenHistory reads the history at path. An empty path gives a history kept
// in memory only.
func OpenHistory(path string) *History {
	h := &History{path: path, recs: map[string]*Record{}}
	if path == "" {
		return h
	}
	data, err := os.ReadFile(path)
	if err == nil {
		var recs map[string]*Record
		if json.Unmarshal(data, &recs) == nil {
			for k, r := range recs {
				if r != nil {
					h.recs[k] = r
				}
			}
		}
	}
	return h
}

// Get returns the record of pk (the zero Record when there is none).
func (h *History) Get(pk nostr.PubKey) Record {
	if h == nil {
		return Record{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.recs[pk.Hex()]; r != nil {
		return *r
	}
	return Record{}
}

// Failed records a failed call to pk at t.
func (h *History) Failed(pk nostr.PubKey, t time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.record(pk)
	r.LastFailure = t
	r.Failures++
}

// Succeeded records a call to pk that was answered in d, at t.
func (h *History) Succeeded(pk nostr.PubKey, d time.Duration, t time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.record(pk)
	if r.Latency == 0 {
		r.Latency = d
	} else {
		r.Latency = (3*r.Latency + d) / 4
	}
	r.LastSuccess, r.Failures = t, 0
}

func (h *History) record(pk nostr.PubKey) *Record {
	r := h.recs[pk.Hex()]
	if r == nil {
		r = &Record{}
		h.recs[pk.Hex()] = r
	}
	return r
}

// Save writes the history to its file, atomically, readable only by its
// owner.
func (h *History) Save() error {
	if h == nil || h.path == "" {
		return nil
	}
	h.mu.Lock()
	for len(h.recs) > maxRecords {
		var oldest string
		var at time.Time
		for k, r := range h.recs {
			if last := later(r.LastFailure, r.LastSuccess); oldest == "" || last.Before(at) {
				oldest, at = k, last
			}
		}
		delete(h.recs, oldest)
	}
	data, err := json.MarshalIndent(h.recs, "", "  ")
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(h.path), ".providers-*")
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

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Path is the history's file ("" for one kept in memory).
func (h *History) Path() string { return h.path }
