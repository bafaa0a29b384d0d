package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/httpserve"
	"github.com/cvmgo/cvm/market"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// marketHelp is the long help of market.
const marketHelp = `Serve the ContextVM marketplace to an agent: one MCP server (on stdio, or
streamable HTTP with --http ADDR) whose tools find, rank, pay for and call
the tools of the servers announced on the relays.

  search    tools by words, common schema hash, category, maximum price;
            each with its server, price, schema, reputation and why
  describe  a server's tools with their schemas and prices, or a common
            schema's providers, best first
  call      a tool on a server, or on the best provider of a common schema,
            failing over to the next (the policy of cvm call --schema:
            --trust, --trust-policy, then reputation, then price)
  budget    what was spent today, per server, and what is left

Priced calls are paid with your wallet (--wallet-file or $CVM_WALLET, and a
payment channel with --channel) within --max-sats a call and the daily
limits (--max-sats-per-day; --max-sats-per-server-per-day, the per-server
budget), kept in the same budget.json as cvm call. Each payment is
confirmed through the host (MCP elicitation) when it offers that;
otherwise only --yes pays. A call refused for its arguments, its price, an
unknown server or a schema with no trusted provider is a tool error that
says what to do, and nothing is sent or paid.

--mount NPUB (or a common schema hash; repeatable) offers that server's
tools (or the schema's, on its best provider) as the market's own, named
SERVER-KEY__TOOL (or TOOL__HASH), called and paid as call does; hosts are
told (notifications/tools/list_changed) when the catalog changes them.`

// marketCmd is one run of cvm market.
type marketCmd struct {
	*app
	cf    clientFlags
	tf    trustFlags
	rf    reputationFlags
	pf    payFlags
	http  string
	mount []string
}

func (a *app) marketCommand() *cobra.Command {
	c := &marketCmd{app: a}
	cmd := &cobra.Command{
		Use:   "market",
		Short: "Serve the marketplace to an agent: search, describe, call and budget as MCP tools",
		Long:  marketHelp,
		Example: `  cvm market --trust npub1… --max-sats 50 --max-sats-per-day 500 --wallet-file ~/.cvm/wallet
  cvm market --http 127.0.0.1:8765 --trust-policy reputation --max-sats 10 --yes`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context()) },
	}
	a.addClientFlags(cmd, &c.cf, 30*time.Second)
	addTrustFlags(cmd, &c.tf)
	addReputationFlags(cmd, &c.rf)
	a.addPayFlags(cmd, &c.pf, true)
	addChannelFlag(cmd, &c.pf)
	cmd.Flags().StringVar(&c.http, "http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
	cmd.Flags().StringArrayVar(&c.mount, "mount", nil, "offer this server's tools (npub, nprofile) or this common schema's tool (its hash) as the market's own, namespaced (repeatable)")
	return cmd
}

func (c *marketCmd) run(ctx context.Context) error {
	enc, err := contextvm.ParseEncryptionMode(c.cf.encryption)
	if err != nil {
		return fmt.Errorf("--encryption: %w", err)
	}
	policy, trusted, err := c.trust(c.tf)
	if err != nil {
		return err
	}
	id, err := c.resolveIdentity(c.cf.key, clientKey)
	if err != nil {
		return err
	}
	pay, paid, err := c.payOptions(c.pf, c.confirmPolicy())
	if err != nil {
		return err
	}
	defer paid.Close()
	closeChannels, err := c.channelOptions(ctx, c.pf, c.cf, pay, paid)
	if err != nil {
		return err
	}
	defer closeChannels()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: c.cf.relays})
	defer pool.Close()
	history := c.history()
	m, err := market.New(market.Options{
		Pool:   pool,
		Client: contextvm.ClientOptions{Signer: contextvm.NewKeySigner(id.secret), Encryption: enc, RequestTimeout: c.cf.timeout, Logger: c.log},
		Pay:    pay, Policy: policy, Trusted: trusted, History: history,
		Reputation: func(ctx context.Context, servers []discovery.Server) (reputation.Scores, error) {
			return c.reputationOf(ctx, pool, c.rf, c.cf.key, history, servers)
		},
		FetchTimeout: relayWaitFor(c.cf.timeout), AttemptTimeout: c.cf.timeout,
		Mounts: c.mount, Name: "cvm-market", Version: version, Logger: c.log,
	})
	if err != nil {
		return fmt.Errorf("--mount: %w", err)
	}
	mctx, stop := context.WithCancel(ctx)
	mounted := make(chan error, 1)
	go func() { mounted <- m.Mount(mctx) }()
	defer func() {
		stop()
		if err := <-mounted; err != nil {
			c.log.Warn("the mounted tools stopped following the catalog", "err", err)
		}
	}()
	if c.http != "" {
		return c.serveHTTP(ctx, m.Server(), pool)
	}
	return m.Server().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(c.stdin), Writer: nopWriteCloser{c.stdout}})
}

// confirmPolicy is how payments are confirmed when the host cannot be
// asked: stdin is the host's, so no person can answer there; --yes pays
// within the limits, nothing else does.
func (c *marketCmd) confirmPolicy() func(context.Context, contextvm.PaymentOffer) bool {
	if c.pf.yes {
		return nil
	}
	return func(_ context.Context, o contextvm.PaymentOffer) bool {
		c.log.Warn("not paying: the host cannot confirm payments (no MCP elicitation); run cvm market with --yes to pay within --max-sats",
			"amount", o.Amount, "unit", o.Unit, "capability", o.Capability)
		return false
	}
}

// serveHTTP serves the market as streamable HTTP on --http until ctx ends,
// after a JSON ready line on stdout.
func (c *marketCmd) serveHTTP(ctx context.Context, s *mcp.Server, pool *nostrx.Pool) error {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs, err := httpserve.Listen(c.http, h, nil)
	if err != nil {
		return fmt.Errorf("--http %s: %w", c.http, err)
	}
	url := "http://" + hs.Addr.String() + "/"
	if err := c.printJSON(struct {
		Ready  bool     `json:"ready"`
		URL    string   `json:"url"`
		Relays []string `json:"relays"`
	}{true, url, pool.Relays()}); err != nil {
		hs.Shutdown(context.Background())
		return err
	}
	c.log.Info("market listening", "url", url)
	served := make(chan error, 1)
	go func() { served <- hs.Wait() }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	// A host's open event stream would hold Shutdown forever: it gets a
	// few seconds to go.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
