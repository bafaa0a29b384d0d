package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/replica"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/httpserve"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/social"
	"github.com/spf13/cobra"
)

// gatewayPlan is what cvm gateway reads from its flags and arguments
// before it starts anything.
type gatewayPlan struct {
	opts           gateway.Options
	describe, hint string // the upstream, and what to try when it fails
	announceRelays []string
	allowed        []nostr.PubKey
	public         []contextvm.Capability
	enc            contextvm.EncryptionMode
	wrap           contextvm.GiftWrapMode
	prices         []contextvm.Price
	rates          payments.Rates // converts usd prices; nil without --usd-rate-url
	id             identity
	profile        social.Profile // CEP-23; zero: none published
}

// run is cvm gateway: it checks everything it can before it starts
// anything (flags, wallet, state, the upstream once), then builds the
// gateway and serves it until a signal.
func (g *gatewayCmd) run(cmd *cobra.Command, args []string) error {
	p, err := g.plan(cmd, args)
	if err != nil {
		return err
	}
	w, err := g.wallet(p.prices, p.rates)
	if err != nil {
		return err
	}
	if w != nil {
		defer w.close()
	}
	ctx := cmd.Context()
	replicas, state, closeState, err := g.state(ctx, p.id)
	if err != nil {
		return err
	}
	defer closeState()
	gate, processor, closeGate, err := g.collector(ctx, w, p, state, replicas)
	if err != nil {
		return err
	}
	defer closeGate()
	// Start the upstream once before serving anyone: a command that is not
	// found or exits at once is reported now, not to the first client.
	startCtx, cancel := context.WithTimeout(ctx, p.opts.InitializeTimeout)
	defer cancel()
	res, err := gateway.Check(startCtx, p.opts.Upstream, p.opts.InitializeTimeout)
	if err != nil {
		return fmt.Errorf("%w; %s", err, p.hint)
	}
	if g.gf.name == "" && res.ServerInfo != nil {
		g.gf.name = serverInfoName(res.ServerInfo.Title, res.ServerInfo.Name)
	}
	var coordinator contextvm.Coordinator // nil, not a nil *replica.Group, without --nats
	if replicas != nil {
		coordinator = replicas
	}
	p.opts.Server = gatewayServerOptions(g.gf, p, coordinator, state, gate)
	p.opts.Server.Logger = g.log
	p.opts.NoNostr = g.gf.noNostr
	// Starting is waiting for a relay, and in shared mode for the upstream
	// session too.
	wait := relayWait
	if p.opts.Mode == gateway.Shared {
		wait += p.opts.InitializeTimeout
	}
	newCtx, cancelNew := context.WithTimeout(ctx, wait)
	defer cancelNew()
	gw, err := gateway.New(newCtx, p.opts)
	switch {
	case errors.Is(err, gateway.ErrUpstream):
		return fmt.Errorf("%w; %s", err, p.hint)
	case err != nil:
		return noRelay(g.gf.relays, wait, err)
	}
	defer gw.Close()
	return g.serve(ctx, gw, p, gatewayHTTPState(state, gw), processor, replicas)
}

// plan checks the flags and arguments, in the order they are
// reported, and reads them into a plan.
func (g *gatewayCmd) plan(cmd *cobra.Command, args []string) (p gatewayPlan, err error) {
	if p.announceRelays, err = announceRelayURLs(g.gf); err != nil {
		return p, err
	}
	upstream, describe, err := g.upstream(cmd, args)
	if err != nil {
		return p, err
	}
	p.describe, p.hint = describe, "run it by itself to see why"
	if g.gf.upstreamURL != "" {
		p.hint = "is it running at " + g.gf.upstreamURL + "?"
	}
	if p.opts, err = g.options(); err != nil {
		return p, err
	}
	if err := g.gf.checkCombinations(); err != nil {
		return p, err
	}
	if p.allowed, p.public, err = g.access(); err != nil {
		return p, err
	}
	p.opts.Upstream = upstream
	if p.enc, err = contextvm.ParseEncryptionMode(g.gf.encryption); err != nil {
		return p, fmt.Errorf("--encryption: %w", err)
	}
	if p.wrap, err = contextvm.ParseGiftWrapMode(g.gf.giftWrap); err != nil {
		return p, fmt.Errorf("--gift-wrap: %w", err)
	}
	for _, s := range g.gf.prices {
		pr, err := contextvm.ParsePrice(s)
		if err != nil {
			return p, fmt.Errorf("--price: %w", err)
		}
		p.prices = append(p.prices, pr)
	}
	rates, err := g.usdRates(g.gf.rate)
	if err != nil {
		return p, err
	}
	if rates != nil { // no nil *usdrate.Source in the interface
		p.rates = rates
	}
	if p.profile, err = g.gf.profile.profile(); err != nil {
		return p, err
	}
	p.id, err = g.resolveIdentity(g.gf.key, serverKey)
	return p, err
}

// checkCombinations refuses flags that mean nothing together.
func (gf gatewayFlags) checkCombinations() error {
	switch {
	case gf.sessionRate == 0 || gf.sessionRate < -1 || gf.sessionBurst < 1:
		return fmt.Errorf("--session-rate must be positive (or -1 for no limit) and --session-burst at least 1")
	case gf.noNostr && gf.httpAddr == "":
		return errors.New("--no-nostr serves over HTTP only: give --http ADDR too")
	case (gf.authCompat || gf.authWindow != didauth.DefaultWindow) && gf.httpAddr == "":
		return errors.New("--auth-window and --auth-compat are for the HTTP endpoint: give --http ADDR too")
	case gf.authWindow <= 0:
		return fmt.Errorf("--auth-window %s: give a positive duration, e.g. 5m", gf.authWindow)
	case gf.requireAuth && gf.httpAddr == "":
		return errors.New("--require-auth is for the HTTP endpoint: give --http ADDR too (over Nostr every request is signed)")
	case gf.noNostr && gf.announce:
		return errors.New("--announce publishes on Nostr: drop it or --no-nostr")
	case gf.noNostr && gf.replica.natsURL != "":
		return errors.New("--nats makes replicas of a server on Nostr: drop it or --no-nostr")
	}
	return nil
}

// wallet opens the receiving wallet of --wallet-file or $CVM_WALLET; nil
// without one, or with --zap-address (see collector).
func (g *gatewayCmd) wallet(prices []contextvm.Price, rates payments.Rates) (*wallet, error) {
	if g.gf.zapAddress != "" {
		if g.gf.walletFile != "" {
			return nil, errors.New("--zap-address and --wallet-file are two ways to collect: give one")
		}
		return nil, nil
	}
	uri, err := g.walletURI(g.gf.walletFile)
	if err != nil || uri == "" {
		return nil, err
	}
	if g.gf.paymentTTL < time.Second {
		return nil, fmt.Errorf("--payment-ttl %v: want at least 1s", g.gf.paymentTTL)
	}
	if g.gf.channelIdleTTL < time.Second {
		return nil, fmt.Errorf("--channel-idle-ttl %v (payments.channel-idle-ttl): want at least 1s", g.gf.channelIdleTTL)
	}
	w, err := openWallet(uri, g.log, g.gf.paymentTTL)
	if err != nil {
		return nil, err
	}
	if len(prices) == 0 {
		g.log.Warn("a wallet but no --price: nothing is charged")
	}
	if err := collectable(prices, rates); err != nil {
		w.close()
		return nil, err
	}
	return &w, nil
}

// collectable checks that the prices can be collected, in sats: a usd
// price needs a rate source to convert it. The source is not fetched
// here: one down at start is refused at each call, as one that fails
// later is.
func collectable(prices []contextvm.Price, rates payments.Rates) error {
	for _, p := range prices {
		if p.Unit == payments.UnitUSD && rates == nil {
			return fmt.Errorf("--price %s=%s:usd is paid in sats converted at the bitcoin price in usd: give the rate source, --usd-rate-url URL and --usd-rate-pointer /PATH (or [payments.usd-rate] in config.toml)", p.Capability, p.Amount)
		}
	}
	return nil
}

// state is where the gateway keeps what must survive a restart:
// the ids of executed requests, so that a replay never runs twice, and
// payment records. One store per server key, so that gateways with other
// keys may share the directory, and one process per key. With --nats they
// live in the replica group's bucket instead. Taken before the upstream is
// started: a gateway that may not run starts nobody's program.
func (g *gatewayCmd) state(ctx context.Context, id identity) (*replica.Group, durable.Store, func(), error) {
	replicas, closeNATS, err := g.gf.replica.connect(ctx, g.app)
	if err != nil {
		return nil, nil, nil, err
	}
	if replicas != nil {
		return replicas, nil, closeNATS, nil
	}
	dataDir, err := g.dataSubdir(g.gf.data, "gateway")
	if err != nil {
		closeNATS()
		return nil, nil, nil, err
	}
	st, err := durable.Open(dataDir, id.secret.Public().Hex(), durable.Options{})
	if errors.Is(err, durable.ErrLocked) {
		err = fmt.Errorf("another cvm gateway with this key already runs on %s; stop it, or give this one another --key or --data, or make them replicas with --nats", dataDir)
	} else if err != nil {
		err = fmt.Errorf("gateway state: %w", err)
	}
	if err != nil {
		closeNATS()
		return nil, nil, nil, err
	}
	return nil, st, func() { st.Close(); closeNATS() }, nil
}

// gatewayServerOptions are the options of the contextvm.Server the
// gateway serves through.
func gatewayServerOptions(gf gatewayFlags, p gatewayPlan, coordinator contextvm.Coordinator, state durable.Store, gate contextvm.Gate) contextvm.ServerOptions {
	return contextvm.ServerOptions{
		Replicas:           coordinator,
		State:              state,
		Transfers:          contextvm.TransferLimits{MaxPeerBytes: gf.transferBytes},
		SessionRate:        gf.sessionRate,
		SessionBurst:       gf.sessionBurst,
		Signer:             contextvm.NewKeySigner(p.id.secret),
		Relays:             gf.relays,
		AllowedClients:     p.allowed,
		PublicCapabilities: p.public,
		Encryption:         p.enc,
		GiftWrap:           p.wrap,
		Info:               contextvm.ServerInfo{Name: gf.name, About: gf.about, Website: gf.website, Picture: gf.pict},
		InjectClientPubkey: gf.injectClientPubkey,
		Announce:           gf.announce,
		AnnounceRelays:     p.announceRelays,
		Prices:             p.prices,
		Gate:               gate,
		CommonTools:        gf.commonTools,
		ToolCategories:     gf.cats,
		UnannounceOnClose:  gf.unannounceOnExit,
	}
}

// gatewayHTTPState is where the HTTP endpoint keeps its nonces and
// quotations: where the server keeps its state, with --nats in the group's
// bucket, so that a request signed for the gateway's DID is accepted once
// by the whole group and a quotation is spent once.
func gatewayHTTPState(state durable.Store, gw *gateway.Gateway) durable.Store {
	if state == nil && gw.Server() != nil {
		return gw.Server().State()
	}
	return state
}

// gatewayReadyLine is the JSON line cvm gateway prints once it serves.
type gatewayReadyLine struct {
	Ready    bool     `json:"ready"`
	Pubkey   string   `json:"pubkey"`
	Npub     string   `json:"npub"`
	Relays   []string `json:"relays"`
	Mode     string   `json:"mode"`
	Upstream string   `json:"upstream"`
	Metrics  string   `json:"metrics,omitempty"`
	Announce bool     `json:"announce"`
	HTTP     string   `json:"http,omitempty"`
	DID      string   `json:"did,omitempty"`
}

// serve serves gw (and its HTTP and metrics endpoints), prints the
// ready line and runs until the command's context ends or the gateway
// stops.
func (g *gatewayCmd) serve(ctx context.Context, gw *gateway.Gateway, p gatewayPlan, httpState durable.Store, processor payments.Processor, replicas *replica.Group) error {
	pk := p.id.secret.Public()
	ready := gatewayReadyLine{Ready: true, Pubkey: pk.Hex(), Npub: nostrx.EncodeNpub(pk), Relays: []string{},
		Mode: p.opts.Mode.String(), Upstream: p.describe, Announce: g.gf.announce}
	if g.gf.httpAddr != "" {
		ep, err := g.listenHTTP(gw, p, httpState, processor)
		if err != nil {
			return err
		}
		defer ep.Shutdown(context.Background())
		ready.HTTP, ready.DID = ep.URL, ep.DID
	}
	if g.gf.metrics != "" {
		metrics, err := httpserve.Listen(g.gf.metrics, gw.Handler(), nil)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		defer metrics.Shutdown(context.Background())
		ready.Metrics = "http://" + metrics.Addr.String() + "/metrics"
	}

	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()
	if srv := gw.Server(); srv != nil {
		ready.Relays = srv.Relays()
		g.publishProfile(ctx, p, slices.Concat(ready.Relays, p.announceRelays))
	}
	if err := g.printJSON(ready); err != nil {
		return err
	}
	g.log.Info("gateway serving", "npub", ready.Npub, "mode", ready.Mode, "upstream", p.describe, "relays", ready.Relays)
	if replicas != nil {
		g.log.Info("serving as a replica", "replica", replicas.Status().Member, "nats", g.gf.replica.natsURL)
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		// Serve also returns when ctx is cancelled, and may win the race
		// with ctx.Done: that is a shutdown, not a failure.
		if ctx.Err() == nil {
			return fmt.Errorf("gateway stopped: %w", err)
		}
		served <- err
	}
	g.log.Info("shutting down")
	// The gateway stops its server (which answers what is in flight with
	// an error, and deletes the announcements if asked to), then the
	// upstream sessions.
	gw.Close()
	if err = <-served; err != nil && !errors.Is(err, gateway.ErrClosed) && !errors.Is(err, context.Canceled) {
		g.log.Debug("serve ended", "err", err)
	}
	return nil
}
