package market

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a market.
type Options struct {
	// Pool reads the catalog, and its relays are added to each provider's.
	Pool *nostrx.Pool
	// Client is how providers are called: signer, encryption, timeouts.
	// Its Payer is the market's own, made per call from Pay.
	Client contextvm.ClientOptions
	// Pay is how calls are paid: wallets, the budget (per call, per day,
	// per server per day; the budget.json every cvm on the machine
	// shares), and Confirm, asked before each payment when the host
	// cannot be asked (it declared no elicitation). Nil pays nothing.
	Pay *cep8.PayOptions

	// Policy, Trusted, History and Reputation choose and rank providers
	// exactly as cvm call --schema does (discovery.Choose).
	Policy  discovery.TrustPolicy
	Trusted map[nostr.PubKey]bool
	History *discovery.History
	// Reputation scores servers (nil: unscored). It is asked only when
	// there is a choice to make.
	Reputation func(ctx context.Context, servers []discovery.Server) (reputation.Scores, error)

	// FetchTimeout bounds each read of the catalog from the relays
	// (default 5 s); AttemptTimeout each provider's call (default 30 s).
	FetchTimeout   time.Duration
	AttemptTimeout time.Duration

	// Mounts are servers (npub, nprofile) and common schema hashes whose
	// tools the market offers as its own, namespaced, while Mount runs.
	Mounts []string

	// Name and Version are the server's implementation.
	Name, Version string
	Logger        *slog.Logger
}

// Market is the marketplace's MCP server: a catalog read from relays,
// and the tools an agent uses on it.
type Market struct {
	opts   Options
	log    *slog.Logger
	server *mcp.Server
	mounts []mount
}

// New returns a market; Server is its MCP server.
func New(opts Options) (*Market, error) {
	if opts.Pool == nil {
		return nil, errors.New("market: Options needs a Pool")
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = 5 * time.Second
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 30 * time.Second
	}
	if opts.Name == "" {
		opts.Name = "cvm-market"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mounts, err := parseMounts(opts.Mounts)
	if err != nil {
		return nil, err
	}
	m := &Market{opts: opts, log: log, mounts: mounts}
	m.server = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
	})
	m.addTools()
	return m, nil
}

// Server is the market's MCP server, to run on a transport.
func (m *Market) Server() *mcp.Server { return m.server }

const instructions = `A marketplace of ContextVM tools (MCP servers on Nostr). Use search to
find tools (by words, common schema hash, category, maximum price), describe
to read a server's tools or a schema's providers, call to call a tool on a
server or on the best provider of a common schema (paid within the user's
budget), and budget to see what was spent today and what is left.`

// catalog reads the announcements from the relays, within FetchTimeout.
func (m *Market) catalog(ctx context.Context, f discovery.Filter) (*discovery.Catalog, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.FetchTimeout)
	defer cancel()
	c, err := discovery.Fetch(ctx, m.opts.Pool, f)
	if err != nil && (c == nil || len(c.Servers(discovery.Filter{})) == 0) {
		return nil, fmt.Errorf("reading the catalog from %d relay(s): %w", len(m.opts.Pool.Relays()), err)
	}
	return c, nil
}

// ranking is the order of providers, scored when there is a choice.
func (m *Market) ranking(ctx context.Context, candidates []discovery.Server) (discovery.Ranking, reputation.Scores) {
	r := discovery.Ranking{Policy: m.opts.Policy, Trusted: m.opts.Trusted, History: m.opts.History}
	if m.opts.Reputation == nil || (len(candidates) < 2 && m.opts.Policy != discovery.ByReputation) {
		return r, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.FetchTimeout)
	defer cancel()
	scores, err := m.opts.Reputation(ctx, candidates)
	if err != nil {
		m.log.Warn("could not score the providers; ranking them without reputation", "err", err)
		return r, nil
	}
	if scores != nil {
		r.Reputation = scores
	}
	return r, scores
}

// schemaOffer is what the catalog offers for one common schema: its
// providers, ranked, and the catalog they came from.
type schemaOffer struct {
	catalog   *discovery.Catalog
	hash      string
	ranking   discovery.Ranking
	scores    reputation.Scores
	providers []discovery.Provider
	excluded  int // providers the trust policy rules out
}

// schemaProviders ranks the providers of schema, a hash or the start of
// one. A whole hash is asked of the relays alone; a start needs the
// catalog to be resolved.
func (m *Market) schemaProviders(ctx context.Context, schema string) (schemaOffer, error) {
	var f discovery.Filter
	if schemaHash.MatchString(strings.ToLower(schema)) {
		f.SchemaHash = strings.ToLower(schema)
	}
	catalog, err := m.catalog(ctx, f)
	if err != nil {
		return schemaOffer{}, err
	}
	hash, err := resolveSchema(catalog, schema)
	if err != nil {
		return schemaOffer{}, err
	}
	o := schemaOffer{catalog: catalog, hash: hash}
	o.ranking, o.scores = m.ranking(ctx, catalog.Servers(discovery.Filter{SchemaHash: hash}))
	o.providers, o.excluded = catalog.Providers(hash, o.ranking)
	return o, nil
}
