package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/spf13/cobra"
)

type discoverFlags struct {
	relays                 []string
	discoveryRelays        []string
	tool, schema, category string
	maxPrice               float64
	encrypted, watch       bool
	verbose, schemas       bool
	timeout                time.Duration
	// --serve: the catalog page (discoverserve.go).
	serve, key string
	allowHosts []string
	pay        payFlags
	// --sort reputation (reputation.go).
	sort string
	rep  reputationFlags
}

// discoverHelp is the long help of discover.
const discoverHelp = `Read the public announcements (CEP-6) on the relays and list the servers:
name, public key, encryption, relays, and their tools with prices and common
schema hashes. A hash counts as verified only when the tool's own schemas
produce it.

Filters: --tool NAME, --schema HASH (verified implementations only; the
start of a hash, such as the 12 characters shown, will do when only one
announced hash starts with it),
--category T, --max-price AMOUNT (in the announced unit; a range counts at its
top; free tools always pass), --encrypted. --json prints one JSON array of
servers; --watch then follows changes (with --json, one server object per
line, or {"pubkey":…,"removed":true} when a server withdraws). --verbose
explains, on stderr, every announcement that was skipped and why.

--schemas lists the common schemas instead: those of the servers whose tools
announcement is marked ["k","io.contextvm/common-schema"], by hash, with the
tool's name, how many servers claim each and how many of those claims are
verified (the tool's own schemas hash to it). --json prints an array of
{"hash","tool","claimed","verified","categories"}.

--sort reputation ranks the servers by their reputation with you, the best
first, each with its score (0 to 100) and why: the reviews of people in
your web of trust (rooted at --wot NPUB, reputation.wot-root, else your cvm
identity: its follows weigh 1, theirs 1/4, anyone else nothing), your own
last calls to it (success rate, median latency) and how long its tools
have been announced (docs/reputation.md has the formula). --json adds
{"reputation":{"score","why",…}} to each server. With --serve, the page
shows each score and why and sorts by it (or by name, as chosen on the
page); the web of trust and its reviews are read once, at start.

--serve ADDR serves the catalog as a web page (e.g. --serve 127.0.0.1:8088;
a JSON ready line gives its URL) and keeps it current until interrupted.
Filters are set on the page and kept in its URL. "Try it" calls a tool with
this cvm's client identity (--key, else the configured one); a priced tool
is called only after the person confirms the price on the page, and paid
only within --max-sats and the daily limits, from the wallet of
--wallet-file or $CVM_WALLET. The page answers only requests naming a
loopback host (or --allow-host) and calls only for its own pages.`

// discoverCmd is one run of cvm discover: the invocation's app and the
// command's flags.
type discoverCmd struct {
	*app
	df discoverFlags
}

func (a *app) discoverCommand() *cobra.Command {
	var df discoverFlags
	cmd := &cobra.Command{
		Use:   "discover",
		Short: "Find announced ContextVM servers",
		Long:  discoverHelp,
		Example: `  cvm discover
  cvm discover --schema 7c61a439f006… --max-price 10
  cvm discover --json --watch --relay wss://relay.example.com
  cvm discover --schemas
  cvm discover --category language --sort reputation`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return (&discoverCmd{app: a, df: df}).run(cmd) },
	}
	addRelayFlag(cmd, &df.relays)
	addDiscoveryRelayFlag(cmd, &df.discoveryRelays)
	f := cmd.Flags()
	f.StringVar(&df.tool, "tool", "", "only servers with a tool of this name")
	f.StringVar(&df.schema, "schema", "", "only servers with a verified implementation of this common schema hash (or a unique start of it)")
	f.StringVar(&df.category, "category", "", "only servers whose tools announcement has this category")
	f.Float64Var(&df.maxPrice, "max-price", 0, "only servers with a matching tool at most this price")
	f.BoolVar(&df.encrypted, "encrypted", false, "only servers that support encryption")
	f.BoolVar(&df.schemas, "schemas", false, "list the common schemas found, with how many servers claim and verify each")
	f.BoolVar(&df.watch, "watch", false, "keep following announcements until interrupted")
	f.BoolVarP(&df.verbose, "verbose", "v", false, "say on stderr which announcements were skipped and why")
	f.DurationVar(&df.timeout, "timeout", 10*time.Second, "how long to wait for the relays to answer")
	f.StringVar(&df.serve, "serve", "", "serve the catalog as a web page on this address (e.g. 127.0.0.1:8088) until interrupted")
	f.StringVar(&df.key, "key", "", "with --serve: secret key file of the identity \"try it\" calls with (default: the configured identity)")
	f.StringSliceVar(&df.allowHosts, "allow-host", nil, "with --serve: host names besides loopback ones the page answers to (patterns like *.example.com)")
	f.StringVar(&df.sort, "sort", "name", "name, or reputation: the best first, with its score and why")
	addReputationFlags(cmd, &df.rep)
	a.addPayFlags(cmd, &df.pay, false)
	config.Bind(f, "timeout", "timeout")
	return cmd
}

func (d *discoverCmd) run(cmd *cobra.Command) error {
	if err := d.df.pay.check(); err != nil {
		return err
	}
	if err := d.checkSort(); err != nil {
		return err
	}
	filter, prefix, whole, err := d.filter(cmd)
	if err != nil {
		return err
	}
	// Announcements are where clients look servers up: the discovery
	// relays, which are the configured relays unless set.
	relays, err := clientFlags{relays: d.df.relays, discoveryRelays: d.df.discoveryRelays}.discoveryRelayURLs()
	if err != nil {
		return err
	}
	d.df.relays = relays
	ctx := cmd.Context()
	// The pool drops events with bad signatures, saying so in its log:
	// part of what --verbose explains.
	poolLog := slog.New(slog.DiscardHandler)
	if d.df.verbose {
		poolLog = d.log
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: d.df.relays, Logger: poolLog})
	defer pool.Close()

	if d.df.schemas {
		return d.listSchemas(ctx, pool)
	}
	if d.df.serve != "" {
		return d.serve(ctx, pool, cmd.Flags().Changed("max-price"))
	}
	stop := d.spinner("asking " + strings.Join(pool.Relays(), ", "))
	qctx, cancel := context.WithTimeout(ctx, d.df.timeout)
	var catalog *discovery.Catalog
	if prefix != "" {
		catalog, filter.SchemaHash, err = fetchForSchema(qctx, pool, filter, prefix, whole)
	} else {
		catalog, err = discovery.Fetch(qctx, pool, filter)
	}
	cancel()
	stop()
	if perr := (*schemaPrefixError)(nil); errors.As(err, &perr) {
		if perr.ambiguous() {
			return perr
		}
		if d.df.watch {
			return fmt.Errorf("%w; to wait for a schema not announced yet, give its whole hash", perr)
		}
		if d.jsonOut {
			return d.printJSON([]discovery.Server{})
		}
		fmt.Fprintln(d.stderr, perr)
		return nil
	}
	if err != nil {
		return noRelay(d.df.relays, d.df.timeout, err)
	}
	servers := catalog.Servers(filter)
	scores, err := d.rank(ctx, pool, servers)
	if err != nil {
		return err
	}
	socials, err := d.social(ctx, pool, servers)
	if err != nil {
		return err
	}
	if err := d.printServers(catalog, servers, filter, listing{scores: scores, socials: socials}); err != nil {
		return err
	}
	if !d.df.watch {
		return nil
	}
	return d.watch(ctx, pool, catalog, filter, d.df.verbose)
}

// filter is the discovery filter of the flags, and the schema hash (or
// the start of one) they name, if any.
func (d *discoverCmd) filter(cmd *cobra.Command) (f discovery.Filter, prefix string, whole bool, err error) {
	f = discovery.Filter{Tool: d.df.tool, Category: d.df.category, Encrypted: d.df.encrypted}
	if d.df.schema != "" {
		if prefix, whole, err = schemaArg(d.df.schema); err != nil {
			return f, "", false, err
		}
	}
	if cmd.Flags().Changed("max-price") {
		if !(d.df.maxPrice >= 0) || math.IsInf(d.df.maxPrice, 1) {
			return f, "", false, fmt.Errorf("--max-price %g: want a price of 0 or more, such as 10", d.df.maxPrice)
		}
		f.MaxPrice = &d.df.maxPrice
	}
	return f, prefix, whole, nil
}

// rank scores servers and sorts them by reputation, with --sort
// reputation; nil scores otherwise.
func (d *discoverCmd) rank(ctx context.Context, pool *nostrx.Pool, servers []discovery.Server) (reputation.Scores, error) {
	if d.df.sort != "reputation" {
		return nil, nil
	}
	stop := d.spinner("reading reviews from your web of trust")
	qctx, cancel := context.WithTimeout(ctx, d.df.timeout)
	scores, err := d.reputationOf(qctx, pool, d.df.rep, d.df.key, d.history(), servers)
	cancel()
	stop()
	if err != nil {
		return nil, err
	}
	reputation.Sort(servers, scores)
	return scores, nil
}

// serve is cvm discover --serve: the whole catalog, fetched once
// and then kept live, on a local page.
func (d *discoverCmd) serve(ctx context.Context, pool *nostrx.Pool, maxPriceSet bool) error {
	if d.df.watch || d.df.tool != "" || d.df.schema != "" || d.df.category != "" || d.df.encrypted || maxPriceSet {
		return errors.New("--serve shows the whole catalog, filtered on the page: it takes no --watch or filter flags")
	}
	stop := d.spinner("asking " + strings.Join(pool.Relays(), ", "))
	qctx, cancel := context.WithTimeout(ctx, d.df.timeout)
	catalog, err := discovery.Fetch(qctx, pool, discovery.Filter{})
	cancel()
	stop()
	if err != nil {
		return noRelay(d.df.relays, d.df.timeout, err)
	}
	return d.serveCatalog(ctx, pool, catalog)
}

// checkSort checks --sort and what it may be combined with.
func (d *discoverCmd) checkSort() error {
	switch {
	case d.df.sort != "name" && d.df.sort != "reputation":
		return fmt.Errorf("--sort %q: want name or reputation", d.df.sort)
	case d.df.sort == "reputation" && d.df.watch:
		return errors.New("--sort reputation ranks the servers once: it takes no --watch (the page of --serve ranks and stays live)")
	case d.df.sort == "reputation" && d.df.schemas:
		return errors.New("--sort reputation ranks servers: it takes no --schemas")
	}
	return nil
}

// listing is what discover shows of servers besides their announcements.
type listing struct {
	scores  reputation.Scores // with --sort reputation
	socials map[nostr.PubKey]serverSocial
}

// rankedServer is a server in --json with --sort reputation.
type rankedServer struct {
	discoveredServer
	Reputation reputation.Score `json:"reputation"`
}

// printServers prints servers, of the catalog and passing the filter, with
// their profiles and notes, and their scores when ranked (with --verbose,
// what was skipped and why).
func (d *discoverCmd) printServers(catalog *discovery.Catalog, servers []discovery.Server, filter discovery.Filter, l listing) error {
	if d.df.verbose {
		d.printSkipped(catalog.Skipped())
		for _, s := range servers {
			for _, w := range s.PriceWarnings {
				fmt.Fprintf(d.stderr, "%s (%s): ignored %s\n", s.Name, shorten(s.Npub, 20), w)
			}
		}
	}
	switch {
	case d.jsonOut && d.df.watch:
		for _, s := range servers {
			if err := d.printJSON(discoveredServer{s, l.socials[s.Pubkey]}); err != nil {
				return err
			}
		}
	case d.jsonOut && l.scores != nil:
		ranked := make([]rankedServer, len(servers))
		for i, s := range servers {
			ranked[i] = rankedServer{discoveredServer{s, l.socials[s.Pubkey]}, l.scores[s.Pubkey]}
		}
		return d.printJSON(ranked)
	case d.jsonOut:
		out := make([]discoveredServer, len(servers))
		for i, s := range servers {
			out[i] = discoveredServer{s, l.socials[s.Pubkey]}
		}
		if err := d.printJSON(out); err != nil {
			return err
		}
	case len(servers) == 0 && !d.df.watch:
		fmt.Fprintln(d.stderr, "no servers found")
	default:
		for i, s := range servers {
			if i > 0 {
				fmt.Fprintln(d.stdout)
			}
			printServer(d.stdout, s, filter)
			if sc, ok := l.scores[s.Pubkey]; ok {
				fmt.Fprintf(d.stdout, "  reputation %.1f: %s\n", sc.Value, sc.Why)
			}
			printSocial(d.stdout, l.socials[s.Pubkey])
		}
	}
	return nil
}

// watch prints each server whose listing changes until ctx ends.
func (d *discoverCmd) watch(ctx context.Context, pool *nostrx.Pool, catalog *discovery.Catalog, filter discovery.Filter, verbose bool) error {
	skipped := len(catalog.Skipped())
	shown := map[nostr.PubKey]bool{}
	for _, s := range catalog.Servers(filter) {
		shown[s.Pubkey] = true
	}
	err := catalog.Watch(ctx, pool, func(pk nostr.PubKey) {
		if verbose {
			all := catalog.Skipped()
			d.printSkipped(all[min(skipped, len(all)):])
			skipped = len(all)
		}
		s, ok := catalog.Server(pk)
		if ok && filter.Match(s) {
			shown[pk] = true
			if d.jsonOut {
				d.printJSON(s)
				return
			}
			fmt.Fprintf(d.stdout, "\n%s updated:\n", time.Now().Format(time.TimeOnly))
			printServer(d.stdout, s, filter)
			return
		}
		if !shown[pk] {
			return
		}
		delete(shown, pk)
		if d.jsonOut {
			d.printJSON(struct {
				Pubkey  string `json:"pubkey"`
				Npub    string `json:"npub"`
				Removed bool   `json:"removed"`
			}{pk.Hex(), nostrx.EncodeNpub(pk), true})
			return
		}
		fmt.Fprintf(d.stdout, "\n%s withdrawn: %s\n", time.Now().Format(time.TimeOnly), nostrx.EncodeNpub(pk))
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// listSchemas is cvm discover --schemas.
func (d *discoverCmd) listSchemas(ctx context.Context, pool *nostrx.Pool) error {
	if d.df.watch || d.df.tool != "" || d.df.schema != "" || d.df.category != "" || d.df.encrypted || d.df.maxPrice != 0 {
		return errors.New("--schemas lists every common schema: it takes no --watch or filter")
	}
	stop := d.spinner("asking " + strings.Join(pool.Relays(), ", "))
	qctx, cancel := context.WithTimeout(ctx, d.df.timeout)
	catalog := discovery.NewCatalog()
	err := catalog.FetchSchemas(qctx, pool)
	cancel()
	stop()
	if err != nil {
		return noRelay(d.df.relays, d.df.timeout, err)
	}
	if d.df.verbose {
		d.printSkipped(catalog.Skipped())
	}
	schemas := catalog.Schemas()
	switch {
	case d.jsonOut:
		return d.printJSON(schemas)
	case len(schemas) == 0:
		fmt.Fprintln(d.stderr, "no common schemas found")
		return nil
	}
	tw := tabwriter.NewWriter(d.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEMA\tTOOL\tSERVERS\tVERIFIED\tCATEGORIES")
	for _, sc := range schemas {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", sc.Hash, shorten(sc.Tool, 40), sc.Claimed, sc.Verified, strings.Join(sc.Categories, ", "))
	}
	return tw.Flush()
}

func (d *discoverCmd) printSkipped(skipped []discovery.Skipped) {
	for _, s := range skipped {
		fmt.Fprintf(d.stderr, "skipped kind %d %s from %s: %s\n", s.Kind, s.Event.Hex()[:12], nostrx.EncodeNpub(s.Pubkey), s.Reason)
	}
}

// printServer writes one server for a person to read.
func printServer(w io.Writer, s discovery.Server, filter discovery.Filter) {
	enc := "plaintext only"
	if s.Encryption {
		enc = "encrypted"
	}
	fmt.Fprintf(w, "%s  %s  %s  updated %s\n", s.Name, s.Npub, enc, s.UpdatedAt.Local().Format("2006-01-02 15:04"))
	if s.About != "" {
		fmt.Fprintf(w, "  %s\n", firstLine(s.About))
	}
	if s.Website != "" {
		fmt.Fprintf(w, "  %s\n", s.Website)
	}
	if len(s.Relays) > 0 {
		fmt.Fprintf(w, "  relays: %s\n", strings.Join(s.Relays, ", "))
	}
	if len(s.Categories) > 0 {
		fmt.Fprintf(w, "  categories: %s\n", strings.Join(s.Categories, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range s.Tools {
		mark := " "
		if (filter.Tool != "" || filter.SchemaHash != "" || filter.MaxPrice != nil) && filter.MatchTool(t) {
			mark = "*"
		}
		schema := ""
		switch {
		case t.Verified:
			schema = "schema " + t.SchemaHash[:12] + " verified"
		case t.SchemaHash != "":
			schema = "schema " + shorten(t.SchemaHash, 12) + " NOT VERIFIED: " + firstLine(t.SchemaError)
		}
		fmt.Fprintf(tw, "  %s %s\t%s\t%s\t%s\n", mark, t.Name, t.Price, schema, firstLine(t.Description))
	}
	tw.Flush()
	var more []string
	for _, n := range []struct {
		what string
		n    int
	}{{"resources", len(s.Resources)}, {"templates", len(s.Templates)}, {"prompts", len(s.Prompts)}} {
		if n.n > 0 {
			more = append(more, fmt.Sprintf("%d %s", n.n, n.what))
		}
	}
	if len(more) > 0 {
		fmt.Fprintf(w, "  and %s (--json lists them)\n", strings.Join(more, ", "))
	}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// spinner shows what is being waited for on stderr when stderr is a
// terminal, until the returned function is called.
func (a *app) spinner(what string) (stop func()) {
	f, ok := a.stderr.(*os.File)
	if !ok {
		return func() {}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		frames := `|/-\`
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(f, "\r%c %s", frames[i%len(frames)], what)
			select {
			case <-done:
				fmt.Fprintf(f, "\r%s\r", strings.Repeat(" ", len(what)+2))
				return
			case <-tick.C:
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
