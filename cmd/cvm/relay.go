package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/relay"
	"github.com/spf13/cobra"
)

func (a *app) relayCommand() *cobra.Command {
	var (
		listen, db, name, description string
		memory, auth, trustXFF        bool
		giftWrapTTL                   time.Duration
		limits                        relay.Limits
	)
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Run the embedded Nostr relay",
		Long: `Run a Nostr relay (khatru) on a local address. Events are stored in a bbolt
database (--db) or kept in memory (--memory). Ephemeral events (kinds
20000-29999, every ContextVM message) are delivered and never stored.

When the relay is ready, one JSON line is printed on stdout:
  {"ready":true,"url":"ws://127.0.0.1:7777",...}
Logs go to stderr. SIGINT or SIGTERM shuts it down cleanly.`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if memory && cmd.Flags().Changed("db") {
				return fmt.Errorf("--db and --memory are exclusive: choose where events live")
			}
			path := ""
			if !memory {
				path = db
				if path == "" {
					dir, err := config.DataDir(a.getenv)
					if err != nil {
						return err
					}
					path = filepath.Join(dir, "relay.db")
				}
			}
			s, err := relay.Start(listen, relay.Options{
				DBPath:            path,
				Name:              name,
				Description:       description,
				Version:           currentVersion().Version,
				Auth:              auth,
				GiftWrapTTL:       giftWrapTTL,
				Limits:            limits,
				TrustForwardedFor: trustXFF,
				Logger:            a.log,
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
			}{true, s.URL, "http://" + s.Addr.String() + "/metrics", path, memory, auth}
			if err := a.printJSON(ready); err != nil {
				s.Close()
				return err
			}
			a.log.Info("relay listening", "url", s.URL, "db", path, "memory", memory, "auth", auth)

			select {
			case <-cmd.Context().Done():
				a.log.Info("shutting down")
			case err := <-waitErr(s):
				s.Close()
				return err
			}
			return s.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:7777", "address to listen on (127.0.0.1:0 picks a free port)")
	f.StringVar(&db, "db", "", "bbolt database file (default: relay.db in the data directory)")
	f.BoolVar(&memory, "memory", false, "keep events in memory only (gone at exit)")
	f.BoolVar(&auth, "auth", false, "NIP-42: serve stored gift wraps only to their authenticated recipient")
	f.StringVar(&name, "name", "cvm relay", "relay name in the NIP-11 document")
	f.StringVar(&description, "description", "embedded relay of cvm", "relay description in the NIP-11 document")
	f.DurationVar(&giftWrapTTL, "gift-wrap-ttl", relay.DefaultGiftWrapTTL, "how long stored gift wraps (kind 1059) are kept; negative keeps them")
	f.Int64Var(&limits.MaxMessageBytes, "max-message-bytes", 256<<10, "largest websocket message accepted")
	f.IntVar(&limits.MaxSubscriptions, "max-subscriptions", 64, "open subscriptions per connection (-1: unlimited)")
	f.IntVar(&limits.MaxFilters, "max-filters", 256, "live filters per connection (-1: unlimited)")
	f.Float64Var(&limits.EventsPerSecond, "events-per-second", 200, "events accepted per second per client IP (-1: unlimited)")
	f.IntVar(&limits.EventBurst, "event-burst", 1000, "burst of events per client IP")
	f.Float64Var(&limits.ConnectionsPerSecond, "connections-per-second", 10, "new connections per second per client IP (-1: unlimited)")
	f.IntVar(&limits.ConnectionBurst, "connection-burst", 50, "burst of new connections per client IP")
	f.BoolVar(&trustXFF, "trust-forwarded-for", false, "key per-IP limits on X-Forwarded-For (only behind a proxy that sets it)")
	for _, name := range []string{"listen", "db", "memory", "auth", "name", "description", "gift-wrap-ttl",
		"max-message-bytes", "max-subscriptions", "max-filters", "events-per-second", "event-burst",
		"connections-per-second", "connection-burst", "trust-forwarded-for"} {
		config.Bind(f, name, "relay."+name)
	}
	return cmd
}

// waitErr reports when the server stops serving on its own.
func waitErr(s *relay.Server) <-chan error {
	c := make(chan error, 1)
	go func() { c <- s.Wait() }()
	return c
}
