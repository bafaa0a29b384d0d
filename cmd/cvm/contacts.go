package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// contactTTL bounds how long what a server said of itself is believed: as
// long as its relay list is (discovery.DefaultRelayCacheTTL).
const contactTTL = 24 * time.Hour

// maxContactFile bounds what is read of one record: it is ours, but a
// damaged one must not cost unbounded memory.
const maxContactFile = 4 << 20

// contact is what the one-shot commands remember of a server between runs,
// so that the next run needs fewer round trips: that the server answered a
// session of ours (so it takes stateless requests, CEP-35), whether it
// reads gift wraps (so that an optional client sends the right form first),
// and the tools it listed (to type key=value arguments without asking
// tools/list again). All of it may be out of date: the client corrects
// what it finds wrong, and the record with it.
type contact struct {
	// Answered is when the server last answered.
	Answered time.Time `json:"answered"`
	// Encrypts is whether the server reads gift wraps (CEP-4), as the
	// client transport last knew it; nil when unknown.
	Encrypts *bool `json:"encrypts,omitempty"`
	// Announced is the UpdatedAt of the server's announcement (Unix
	// seconds) when the tools were read; 0 when it had none. Tools read
	// under another announcement are stale.
	Announced int64 `json:"announced,omitempty"`
	// Tools is the last tools list read, from tools/list or the
	// announcement (kind 11317).
	Tools []*mcp.Tool `json:"tools,omitempty"`
	// Prices are the prices stated with Tools, for the payer to hold an
	// amount asked to them (a usd price) when it does not list again.
	Prices []contextvm.Price `json:"prices,omitempty"`
}

// contacts keeps one small file per server in the cache directory. Being a
// cache, a missing or unreadable record is an empty one and a failure to
// write costs only round trips next time. Each record is replaced whole
// through a rename, so that concurrent runs never read half a file.
type contacts struct {
	dir string // "" keeps nothing
	now func() time.Time
}

func (c contacts) path(server nostr.PubKey) string {
	return filepath.Join(c.dir, "servers", server.Hex()+".json")
}

// get returns the record of server, empty when there is none or it is
// older than contactTTL.
func (c contacts) get(server nostr.PubKey) contact {
	if c.dir == "" {
		return contact{}
	}
	f, err := os.Open(c.path(server))
	if err != nil {
		return contact{}
	}
	defer f.Close()
	var rec contact
	if json.NewDecoder(io.LimitReader(f, maxContactFile)).Decode(&rec) != nil {
		return contact{}
	}
	if age := c.now().Sub(rec.Answered); age < 0 || age >= contactTTL {
		return contact{}
	}
	return rec
}

// put replaces the record of server.
func (c contacts) put(server nostr.PubKey, rec contact) error {
	if c.dir == "" {
		return nil
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	path := c.path(server)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// forget drops the record of server.
func (c contacts) forget(server nostr.PubKey) {
	if c.dir != "" {
		os.Remove(c.path(server))
	}
}
