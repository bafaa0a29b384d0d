package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/relay"
	"github.com/spf13/cobra"
)

// relayHelp is the long help of relay.
const relayHelp = `Run a Nostr relay (khatru) on a local address. Events are stored in a bbolt
database (--db) or kept in memory (--memory). Ephemeral events (kinds
20000-29999, every ContextVM message) are delivered and never stored.

When the relay is ready, one JSON line is printed on stdout:
  {"ready":true,"url":"ws://127.0.0.1:7777",...}
Logs go to stderr. SIGINT or SIGTERM shuts it down cleanly.`

// relayFlags are cvm relay's flags.
type relayFlags struct {
	listen, db, name, description string
	memory, auth, trustXFF        bool
	giftWrapTTL                   time.Duration
	limits                        relay.Limits
}

// relayCmd is one run of cvm relay: the invocation's app and the
// command's flags.
type relayCmd struct {
	*app
	rf relayFlags
}

func (a *app) relayCommand() *cobra.Command {
	var rf relayFlags
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Run the embedded Nostr relay",
		Long:  relayHelp,
		Args:  positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return (&relayCmd{app: a, rf: rf}).run(cmd.Context(), cmd.Flags().Changed("db"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&rf.listen, "listen", "127.0.0.1:7777", "address to listen on (127.0.0.1:0 picks a free port)")
	f.StringVar(&rf.db, "db", "", "bbolt database file (default: relay.db in the data directory)")
	f.BoolVar(&rf.memory, "memory", false, "keep events in memory only (gone at exit)")
	f.BoolVar(&rf.auth, "auth", false, "NIP-42: serve stored gift wraps only to their authenticated recipient")
	f.StringVar(&rf.name, "name", "cvm relay", "relay name in the NIP-11 document")
	f.StringVar(&rf.description, "description", "embedded relay of cvm", "relay description in the NIP-11 document")
	f.DurationVar(&rf.giftWrapTTL, "gift-wrap-ttl", relay.DefaultGiftWrapTTL, "how long stored gift wraps (kind 1059) are kept; negative keeps them")
	f.Int64Var(&rf.limits.MaxMessageBytes, "max-message-bytes", 256<<10, "largest websocket message accepted")
	f.IntVar(&rf.limits.MaxSubscriptions, "max-subscriptions", 64, "open subscriptions per connection (-1: unlimited)")
	f.IntVar(&rf.limits.MaxFilters, "max-filters", 256, "live filters per connection (-1: unlimited)")
	f.Float64Var(&rf.limits.EventsPerSecond, "events-per-second", 200, "events accepted per second per client IP (-1: unlimited)")
	f.IntVar(&rf.limits.EventBurst, "event-burst", 1000, "burst of events per client IP")
	f.Float64Var(&rf.limits.ConnectionsPerSecond, "connections-per-second", 10, "new connections per second per client IP (-1: unlimited)")
	f.IntVar(&rf.limits.ConnectionBurst, "connection-burst", 50, "burst of new connections per client IP")
	f.BoolVar(&rf.trustXFF, "trust-forwarded-for", false, "key per-IP limits on X-Forwarded-For (only behind a proxy that sets it)")
	for _, name := range []string{"listen", "db", "memory", "auth", "name", "description", "gift-wrap-ttl",
		"max-message-bytes", "max-subscriptions", "max-filters", "events-per-second", "event-burst",
		"connections-per-second", "connection-burst", "trust-forwarded-for"} {
		config.Bind(f, name, "relay."+name)
	}
	return cmd
}

// run serves the relay until ctx ends; dbChanged says whether --db
// was given.
func (r *relayCmd) run(ctx context.Context, dbChanged bool) error {
	if r.rf.memory && dbChanged {
		return fmt.Errorf("--db and --memory are exclusive: choose where events live")
	}
	path := ""
	if !r.rf.memory {
		path = r.rf.db
		if path == "" {
			dir, err := config.DataDir(r.getenv)
			if err != nil {
				return err
			}
			path = filepath.Join(dir, "relay.db")
		}
	}
	s, err := relay.Start(r.rf.listen, relay.Options{
		DBPath:            path,
		Name:              r.rf.name,
		Description:       r.rf.description,
		Version:           currentVersion().Version,
		Auth:              r.rf.auth,
		GiftWrapTTL:       r.rf.giftWrapTTL,
		Limits:            r.rf.limits,
		TrustForwardedFor: r.rf.trustXFF,
		Logger:            r.log,
	})
	if errors.Is(err, relay.ErrDatabaseLocked) {
		return fmt.Errorf("another cvm relay already runs on %s; stop it, or give this one another --db, or --memory", path)
	}
	if err != nil {
		return err
	}
	ready := struct {
		Ready   bool   `json:"ready"`
		URL     string `json:"url"`
		Metrics string `json:"metrics"`
		DB      string `json:"db,omitempty"`
		Memory  bool   `json:"memory,omitempty"`
		Auth    bool   `json:"auth,omitempty"`
	}{true, s.URL, "http://" + s.Addr.String() + "/metrics", path, r.rf.memory, r.rf.auth}
	if err := r.printJSON(ready); err != nil {
		s.Close()
		return err
	}
	r.log.Info("relay listening", "url", s.URL, "db", path, "memory", r.rf.memory, "auth", r.rf.auth)

	select {
	case <-ctx.Done():
		r.log.Info("shutting down")
	case err := <-waitErr(s):
		s.Close()
		return err
	}
	return s.Close()
}

// waitErr reports when the server stops serving on its own.
func waitErr(s *relay.Server) <-chan error {
	c := make(chan error, 1)
	go func() { c <- s.Wait() }()
	return c
}
