package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/discovery/catalogpage"
	"github.com/cvmgo/cvm/internal/httpserve"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tryItTimeout bounds each answer of a "try it" call (progress restarts
// the clock).
const tryItTimeout = 2 * time.Minute

// serveCatalog is cvm discover --serve: the catalog page, kept current by
// watching the relays, until ctx ends.
func (d *discoverCmd) serveCatalog(ctx context.Context, pool *nostrx.Pool, catalog *discovery.Catalog) error {
	caller := &catalogCaller{a: d.app, cf: clientFlags{relays: d.df.relays, key: d.df.key, encryption: "optional", timeout: tryItTimeout}}
	pay, paid, err := d.payOptions(d.df.pay, nil)
	if err != nil {
		return err
	}
	defer paid.Close()
	budget, maxPerCall := "", int64(0)
	if pay.Budget != nil && len(pay.Handlers) > 0 {
		caller.pay = pay
		maxPerCall = pay.Budget.PerCall
		budget = fmt.Sprintf("at most %d sats a call", pay.Budget.PerCall)
		if pay.Budget.PerDay > 0 {
			budget += fmt.Sprintf(", %d a day", pay.Budget.PerDay)
		}
	}
	fetcher, err := d.outbound()
	if err != nil {
		return err
	}
	soc := &catalogSocial{a: d.app, pool: pool, fetcher: fetcher, relays: pool.Relays()}
	if id, err := d.resolveIdentity(d.df.key, existingKey); err == nil {
		soc.id = &id
	} else {
		d.log.Info("the page posts no reviews: no identity", "err", err)
	}
	rank, err := d.pageReputation(ctx, pool)
	if err != nil {
		return err
	}
	page, err := catalogpage.New(catalogpage.Options{Catalog: catalog, Caller: caller, Social: soc, AllowedHosts: d.df.allowHosts,
		Budget: budget, MaxPerCall: maxPerCall, BudgetUnit: "sats", Rates: pay.Rates, Tolerance: pay.Tolerance, Reputation: rank, Logger: d.log})
	if err != nil {
		return err
	}
	defer page.Close()
	hs, err := httpserve.Listen(d.df.serve, page, nil)
	if err != nil {
		return fmt.Errorf("--serve %s: %w", d.df.serve, err)
	}
	url := "http://" + hs.Addr.String() + "/"
	if err := d.printJSON(struct {
		Ready  bool     `json:"ready"`
		URL    string   `json:"url"`
		Relays []string `json:"relays"`
		Budget string   `json:"budget,omitempty"`
	}{true, url, pool.Relays(), budget}); err != nil {
		hs.Shutdown(context.Background())
		return err
	}
	d.log.Info("catalog page listening", "url", url)
	served := make(chan error, 1)
	go func() { served <- hs.Wait() }()
	watchErr := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		watchErr <- catalog.Watch(wctx, pool, func(nostr.PubKey) { page.Notify() })
	}()
	select {
	case <-ctx.Done():
	case err = <-served:
	case err = <-watchErr:
	}
	stop()
	page.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := hs.Shutdown(sctx); err == nil && serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = serr
	}
	return err
}

// pageReputation is, with --sort reputation, what scores the page's
// servers: the web of trust and its reviews read once, at start, and the
// user's history as it is at each listing (try it adds to it). Nil
// without.
func (d *discoverCmd) pageReputation(ctx context.Context, pool *nostrx.Pool) (func([]discovery.Server) reputation.Scores, error) {
	if d.df.sort != "reputation" {
		return nil, nil
	}
	stop := d.spinner("reading reviews from your web of trust")
	qctx, cancel := context.WithTimeout(ctx, d.df.timeout)
	in, err := d.reputationInputs(qctx, pool, d.df.rep, d.df.key, nil, nil)
	cancel()
	stop()
	if err != nil {
		return nil, err
	}
	return func(servers []discovery.Server) reputation.Scores {
		in := in
		in.History, in.Now = d.history(), time.Now()
		return reputation.Rank(in, servers)
	}, nil
}

// catalogCaller makes the page's "try it" calls with this cvm's client
// identity; a payment is made only within the budget and only up to what
// the person confirmed for this very call.
type catalogCaller struct {
	a   *app
	cf  clientFlags
	pay *cep8.PayOptions // nil: no wallet or no budget, nothing is paid
}

func (c *catalogCaller) Call(ctx context.Context, req catalogpage.CallRequest, rep catalogpage.Reporter) (*mcp.CallToolResult, error) {
	cf := c.cf
	if c.pay != nil {
		p := *c.pay
		p.Confirm = func(_ context.Context, o contextvm.PaymentOffer) bool {
			ok := req.MaxPay > 0 && o.Amount <= req.MaxPay && o.Unit == req.Unit && o.Server == req.Server.Hex()
			if ok {
				rep.Paying(catalogpage.Payment{Amount: o.Amount, Unit: o.Unit})
			}
			return ok
		}
		p.Report = func(r contextvm.PaymentReport) {
			if c.pay.Report != nil {
				c.pay.Report(r)
			}
			if r.Paid && !r.Accepted && !r.Rejected && r.Err == nil {
				rep.Paid(catalogpage.Payment{Amount: r.Amount, Unit: r.Unit})
			}
		}
		cf.pay = &p
	}
	server := nostrx.EncodeNpub(req.Server)
	onProgress := func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		rep.Progress(catalogpage.Progress{Progress: r.Params.Progress, Total: r.Params.Total, Message: r.Params.Message})
	}
	cs, err := c.a.dial(ctx, cf, server, dialOptions{client: &mcp.ClientOptions{ProgressNotificationHandler: onProgress}})
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: req.Tool, Arguments: req.Arguments}
	params.SetProgressToken(fmt.Sprintf("cvm-page-%d", time.Now().UnixNano()))
	rep.Sent()
	start := time.Now()
	res, err := cs.CallTool(ctx, params)
	cs.answered(err)
	if derr, ok := declinedError(err, cf.pay); ok {
		return nil, derr
	}
	c.a.recordCall(cs, time.Since(start), err)
	if err != nil {
		return nil, remoteFailure(ctx, "tools/call "+req.Tool, server, cs.relays, err)
	}
	return res, nil
}
