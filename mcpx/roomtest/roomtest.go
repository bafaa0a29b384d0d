package roomtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/mcpx/history"
	"github.com/cvmgo/cvm/mcpx/room"
)

// NoHistory, as Options.History, starts a gateway without history.
var NoHistory room.HistoryStore = noHistory{}

type noHistory struct{ room.HistoryStore }

// Gateway is a room gateway serving on a loopback port.
type Gateway struct {
	*room.Server
	// Keys sign the tokens the gateway accepts.
	Keys *room.Keys

	t     testing.TB
	dir   string
	opts  room.Options
	store *history.Store // the history roomtest opened, if it did
}

// Start starts a gateway with opts. Unset Tokens are fresh keys; unset
// History is a store in a temporary directory (NoHistory, or a Backend,
// turns it off);
// unset HeartbeatInterval and RatePerSecond turn pings and rate limiting
// off, so that tests see only the envelopes they cause.
func Start(t testing.TB, opts room.Options) *Gateway {
	t.Helper()
	g := &Gateway{t: t, dir: t.TempDir()}
	if opts.Tokens == nil {
		opts.Tokens = NewKeys(t)
	}
	keys, ok := opts.Tokens.(*room.Keys)
	if !ok {
		t.Fatal("roomtest: Options.Tokens must be *room.Keys, to mint tokens")
	}
	g.Keys = keys
	switch opts.History {
	case NoHistory:
		opts.History = nil
	case nil:
		if opts.Backend == nil { // a Backend keeps its own history
			g.store = g.openHistory()
			opts.History = g.store
		}
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = -1
	}
	if opts.RatePerSecond == 0 {
		opts.RatePerSecond = -1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g.opts = opts
	s, err := room.Start("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	g.Server = s
	t.Cleanup(g.Stop)
	return g
}

// NewKeys returns fresh signing keys that live only in memory.
func NewKeys(t testing.TB) *room.Keys {
	t.Helper()
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	k, err := room.NewKeys(ed, secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (g *Gateway) openHistory() *history.Store {
	st, err := history.Open(filepath.Join(g.dir, "history.db"), history.Options{})
	if err != nil {
		g.t.Fatal(err)
	}
	return st
}

// Options are the options the gateway runs with, defaults applied.
func (g *Gateway) Options() room.Options { return g.opts }

// Stop closes the gateway and the history roomtest opened; the test's
// cleanup does it too.
func (g *Gateway) Stop() {
	g.Server.Close()
	if g.store != nil {
		g.store.Close()
	}
}

// Token mints a token for participant id in topic, valid for an hour;
// edits adjust its claims (name, kind, more topics).
func (g *Gateway) Token(topic, id string, edits ...func(*room.Claims)) string {
	g.t.Helper()
	c := room.Claims{Subject: id, Audience: room.Audience{topic}, ExpiresAt: time.Now().Add(time.Hour).Unix()}
	for _, edit := range edits {
		edit(&c)
	}
	tok, err := g.Keys.Sign(c, room.AlgEdDSA)
	if err != nil {
		g.t.Fatal(err)
	}
	return tok
}

// Restart stops the gateway and starts it again on the same address with
// the same keys and history file: what a deploy, or a crash and a restart,
// looks like to participants.
func (g *Gateway) Restart() {
	g.t.Helper()
	g.RestartAfter(func() {})
}

// RestartAfter is Restart with down run while the gateway is stopped.
func (g *Gateway) RestartAfter(down func()) {
	g.t.Helper()
	addr := g.Addr.String()
	g.Server.Close()
	if g.store != nil {
		g.store.Close()
		g.store = g.openHistory()
		g.opts.History = g.store
	}
	down()
	var s *room.Server
	var err error
	// The port can stay taken for a moment after the listener closes.
	if !testwait.Until(g.t.Context(), 10*time.Second, func() bool {
		s, err = room.Start(addr, g.opts)
		return err == nil
	}) {
		g.t.Fatal(err)
	}
	g.Server = s
}
