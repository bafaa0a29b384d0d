package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/admission"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/internal/httpserve"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

type gatewayFlags struct {
	replica replicaFlags // --nats and its companions: gatewayreplicas.go

	relays                     []string
	announceRelays             []string
	key, encryption, giftWrap  string
	allow, public, env         []string
	passEnv                    []string
	name, about, website, pict string
	mode, upstreamURL, metrics string
	data                       string
	maxSessions, sessionBurst  int
	sessionReserve             int
	sessionRate                float64
	transferBytes              int
	idleTimeout                time.Duration
	isolateStateless           bool

	announce, unannounceOnExit bool
	injectClientPubkey         bool
	prices, commonTools, cats  []string
	walletFile                 string
	paymentTTL                 time.Duration

	httpAddr             string
	noNostr, requireAuth bool
	authWindow           time.Duration
	authCompat           bool
}

func (a *app) gatewayCommand() *cobra.Command {
	var gf gatewayFlags
	cmd := &cobra.Command{
		Use:   "gateway [flags] -- COMMAND [ARGS…] | gateway [flags] --upstream-url URL",
		Short: "Put an MCP server on Nostr",
		Long: `Expose an MCP server over ContextVM: a stdio server started as COMMAND (after
--), or a streamable-HTTP server at --upstream-url. Clients reach it by the
gateway's public key through the relays.

--session-mode per-client (the default) gives each client session its own
upstream session (a process, or an HTTP session), at most --max-sessions at
once, closed after --idle-timeout without a message. When all are in use, a
new client replaces a session only if that one has nothing in flight and
has been quiet for 30 s, a client's outside --allow first, never an --allow
client's for a stranger; otherwise it is told to retry later (busy, with
retry_after_ms), as is a client starting sessions faster than --session-rate
and --session-burst allow. Clients that send requests without a session
(stateless, CEP-35: cvm call to a server it knows) share one upstream
session, started with the first and closed after the last, so that one-shot
calls cost no process each; they declared no capabilities, so the upstream
may ask them nothing, and what it keeps between calls they share among
themselves. --isolate-stateless gives them a session each instead. With
--allow, clients outside it hold at most --max-sessions less
--session-reserve sessions (4 by default), and an --allow client is never
refused for sessions they hold: when all are in use, one of theirs gives
way to it. shared runs one upstream session for all clients; requests of
the upstream's to a client (sampling, elicitation) then reach a client only
when exactly one has requests in flight, and are refused otherwise.

--allow PUBKEY (repeatable) serves only those clients; --public METHOD[:NAME]
(repeatable) opens a capability to everyone anyway, e.g. --public tools/list
--public tools/call:get_weather. An upstream that dies is restarted.
--inject-client-pubkey tells the upstream who is calling: each request's
params._meta.clientPubkey is the caller's public key (hex, CEP-16), for a
server that authorizes or bills by caller but sees only stdio or HTTP.

--announce publishes the server's public announcements (its initialize result
and lists, CEP-6, and its relay list) to --relay, from an upstream session of
their own, and again whenever the upstream's lists change. --price
tool:NAME=AMOUNT[:UNIT] (repeatable; also prompt: and resource:, AMOUNT may be
a range MIN-MAX, UNIT defaults to sats) is advertised on the announcements
and on every list answer; with --wallet-file FILE (mode 0600, or $CVM_WALLET),
the receiving wallet's connection URI, they are collected (CEP-8): a priced
request runs only once paid, and is charged at most once. --common-tool NAME
(repeatable) declares a tool as implementing a common schema (CEP-15): its
schema hash goes into its _meta and the announcement's tags, with each
--category. --unannounce-on-exit deletes the announcements at shutdown; cvm
unannounce does it any time.

--http ADDR also serves the upstream over MCP streamable HTTP at
http://ADDR/mcp (--no-nostr: over HTTP only), with the gateway's DID
(did:nostr of its key) and DID document at /.well-known/did.json. HTTP
sessions are sessions like Nostr ones (--session-mode, --max-sessions).
Requests signed with DIDAuthV1 identify their caller; --require-auth refuses
unsigned ones (401), and --allow accepts DIDs too (did:nostr:<hex> is that
key). Priced tools are paid over HTTP through quotations (nip10/quote,
nip10/confirm).

The upstream command gets cvm's environment and each -e KEY=VALUE, but not
the variables cvm reads secrets from (` + "$" + strings.Join(secretenv.Names(), ", $") + `): a third
party's server must not spend from the wallet or sign as the gateway.
--pass-env NAME (repeatable) hands one over anyway. It runs in a process
group of its own, which the gateway stops as a whole (SIGTERM, then SIGKILL
2 s later) when its session ends, when it exits (a restart follows), and
when the gateway stops: nothing it started outlives it.

When ready, one JSON line on stdout gives the gateway's pubkey, npub and
relays (and with --http its MCP endpoint "http" and its "did"). Logs and the upstream's stderr go to stderr. SIGINT or SIGTERM shuts
it down, answering what is in flight with an error.`,
		Example: `  cvm gateway -- npx -y @modelcontextprotocol/server-everything
  cvm gateway --session-mode shared --upstream-url http://127.0.0.1:3001/mcp
  cvm gateway --allow npub1… --public tools/list -- ./my-server --flag
  cvm gateway --announce --price tool:translate=10 --common-tool translate -- ./translator`,
		RunE: func(cmd *cobra.Command, args []string) error { return a.runGateway(cmd, args, gf) },
	}
	addRelayFlag(cmd, &gf.relays)
	f := cmd.Flags()
	f.StringVar(&gf.key, "key", "", "secret key file (default: the configured identity, created on first run)")
	f.StringVar(&gf.encryption, "encryption", "optional", "encryption: optional, required or disabled")
	f.StringVar(&gf.giftWrap, "gift-wrap", "optional", "gift-wrap kinds: optional, ephemeral (21059) or persistent (1059)")
	f.StringSliceVar(&gf.allow, "allow", nil, "serve only this client public key (repeatable)")
	f.StringSliceVar(&gf.public, "public", nil, "a capability anyone may use despite --allow: METHOD or METHOD:NAME (repeatable)")
	f.StringVar(&gf.name, "name", "", "server name announced to clients (default: the upstream's)")
	f.StringVar(&gf.about, "about", "", "server description announced to clients")
	f.StringVar(&gf.website, "website", "", "server website announced to clients")
	f.StringVar(&gf.pict, "picture", "", "server picture URL announced to clients")
	f.StringVar(&gf.mode, "session-mode", "per-client", "per-client or shared")
	f.StringArrayVarP(&gf.env, "env", "e", nil, "KEY=VALUE for the upstream command's environment (repeatable)")
	f.StringArrayVar(&gf.passEnv, "pass-env", nil, "give the upstream command this secret variable of cvm's environment anyway: "+strings.Join(secretenv.Names(), " or ")+" (repeatable)")
	f.StringVar(&gf.upstreamURL, "upstream-url", "", "a streamable-HTTP MCP server to expose instead of a command")
	f.IntVar(&gf.transferBytes, "max-transfer-bytes", 32<<20, "bytes one client's large (CEP-22) requests may hold while they arrive; clients outside --allow share 1 MiB")
	f.StringVar(&gf.data, "data", "", "directory for state that must survive a restart (default: gateway in the data directory)")
	f.StringVar(&gf.metrics, "metrics", "", "serve /metrics and /healthz on this address, e.g. 127.0.0.1:9090")
	f.IntVar(&gf.maxSessions, "max-sessions", 64, "upstream sessions at once in per-client mode")
	f.IntVar(&gf.sessionReserve, "session-reserve", admission.DefaultReserve, "of --max-sessions, those only --allow clients may hold (0: none; the default, at most half of --max-sessions)")
	f.Float64Var(&gf.sessionRate, "session-rate", admission.DefaultRate, "new client sessions a second, overall; one client key gets a quarter (-1: no limit)")
	f.IntVar(&gf.sessionBurst, "session-burst", admission.DefaultBurst, "new client sessions at once beyond --session-rate, overall; one client key gets a quarter")
	f.DurationVar(&gf.idleTimeout, "idle-timeout", 10*time.Minute, "close a client session after this long without a message (0: never)")
	f.BoolVar(&gf.isolateStateless, "isolate-stateless", false, "in per-client mode, give each client without a session (stateless, CEP-35) an upstream session of its own too, rather than one they share")
	f.BoolVar(&gf.injectClientPubkey, "inject-client-pubkey", false, "pass the caller's public key to the upstream in each request's params._meta.clientPubkey (CEP-16)")
	f.BoolVar(&gf.announce, "announce", false, "publish the server's announcements (CEP-6) and keep them current")
	f.StringSliceVar(&gf.announceRelays, "announce-relay", nil, "also publish the announcements and relay list to this relay, where clients look servers up (repeatable; needs --announce)")
	f.BoolVar(&gf.unannounceOnExit, "unannounce-on-exit", false, "delete the announcements when the gateway stops")
	f.StringArrayVar(&gf.prices, "price", nil, "advertise a price: tool:NAME=AMOUNT[:UNIT], prompt:… or resource:URI=… (repeatable)")
	f.StringVar(&gf.walletFile, "wallet-file", "", "file (mode 0600) holding the receiving wallet's connection URI (else $"+walletEnv+"): collect the prices")
	f.DurationVar(&gf.paymentTTL, "payment-ttl", lightning.DefaultTTL, "how long a payment request (a Lightning invoice) can be paid")
	f.StringVar(&gf.httpAddr, "http", "", "also serve MCP streamable HTTP on this address, e.g. 127.0.0.1:8080 (endpoint /mcp)")
	f.BoolVar(&gf.noNostr, "no-nostr", false, "serve over --http only, not over Nostr")
	f.BoolVar(&gf.requireAuth, "require-auth", false, "over --http, refuse requests not signed with a DID (401)")
	f.DurationVar(&gf.authWindow, "auth-window", didauth.DefaultWindow, "over --http, how far a signed request's timestamp may be from now, either way")
	f.BoolVar(&gf.authCompat, "auth-compat", false, "over --http, also accept @nuwa-ai/identity-kit 0.6.0's DIDAuthV1 headers, which do not cover nested params or an audience (see docs/protocol-compatibility.md)")
	f.StringArrayVar(&gf.commonTools, "common-tool", nil, "declare a tool as implementing a common schema (repeatable)")
	f.StringArrayVar(&gf.cats, "category", nil, "a category for the common tools' announcement (repeatable)")
	gf.replica.add(f)
	cmd.Long += replicaHelp
	for _, name := range []string{"key", "encryption", "gift-wrap", "allow", "public", "name", "about", "website", "picture",
		"session-mode", "env", "pass-env", "upstream-url", "inject-client-pubkey", "metrics", "data", "max-transfer-bytes", "max-sessions", "session-reserve", "session-rate", "session-burst", "idle-timeout", "isolate-stateless",
		"announce", "announce-relay", "unannounce-on-exit", "price", "payment-ttl", "common-tool", "category", "http", "no-nostr", "require-auth", "auth-window", "auth-compat"} {
		config.Bind(f, name, "gateway."+name)
	}
	return cmd
}

// announceRelayURLs checks --announce-relay, which needs --announce.
func announceRelayURLs(gf gatewayFlags) ([]string, error) {
	if len(gf.announceRelays) > 0 && !gf.announce {
		return nil, errors.New("--announce-relay publishes the announcements: give --announce too")
	}
	var out []string
	for _, u := range gf.announceRelays {
		p, err := nostrx.ParseRelayURL(nostrx.NormalizeRelayURL(u))
		if uerr := (*nostrx.RelayURLError)(nil); errors.As(err, &uerr) {
			return nil, fmt.Errorf("--announce-relay %q: %s; give a relay URL such as wss://relay.example", clip(u, 80), uerr.Reason)
		} else if err != nil {
			return nil, fmt.Errorf("--announce-relay %q: %w", clip(u, 80), err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (a *app) runGateway(cmd *cobra.Command, args []string, gf gatewayFlags) error {
	announceRelays, err := announceRelayURLs(gf)
	if err != nil {
		return err
	}
	upstream, describe, err := a.gatewayUpstream(cmd, args, gf)
	if err != nil {
		return err
	}
	hint := "run it by itself to see why"
	if gf.upstreamURL != "" {
		hint = "is it running at " + gf.upstreamURL + "?"
	}
	opts, err := a.gatewayOptions(gf)
	if err != nil {
		return err
	}
	if gf.sessionRate == 0 || gf.sessionRate < -1 || gf.sessionBurst < 1 {
		return fmt.Errorf("--session-rate must be positive (or -1 for no limit) and --session-burst at least 1")
	}
	if gf.noNostr && gf.httpAddr == "" {
		return errors.New("--no-nostr serves over HTTP only: give --http ADDR too")
	}
	if (gf.authCompat || gf.authWindow != didauth.DefaultWindow) && gf.httpAddr == "" {
		return errors.New("--auth-window and --auth-compat are for the HTTP endpoint: give --http ADDR too")
	}
	if gf.authWindow <= 0 {
		return fmt.Errorf("--auth-window %s: give a positive duration, e.g. 5m", gf.authWindow)
	}
	if gf.requireAuth && gf.httpAddr == "" {
		return errors.New("--require-auth is for the HTTP endpoint: give --http ADDR too (over Nostr every request is signed)")
	}
	if gf.noNostr && gf.announce {
		return errors.New("--announce publishes on Nostr: drop it or --no-nostr")
	}
	if gf.noNostr && gf.replica.natsURL != "" {
		return errors.New("--nats makes replicas of a server on Nostr: drop it or --no-nostr")
	}
	allowed, public, err := a.access(gf)
	if err != nil {
		return err
	}
	opts.Upstream = upstream
	enc, err := contextvm.ParseEncryptionMode(gf.encryption)
	if err != nil {
		return fmt.Errorf("--encryption: %w", err)
	}
	wrap, err := contextvm.ParseGiftWrapMode(gf.giftWrap)
	if err != nil {
		return fmt.Errorf("--gift-wrap: %w", err)
	}
	var prices []contextvm.Price
	for _, s := range gf.prices {
		p, err := contextvm.ParsePrice(s)
		if err != nil {
			return fmt.Errorf("--price: %w", err)
		}
		prices = append(prices, p)
	}
	id, err := a.resolveIdentity(gf.key, serverKey)
	if err != nil {
		return err
	}
	var gate contextvm.Gate // nil, not a nil *cep8.Gate, without a wallet
	var processor payments.Processor
	if uri, err := a.walletURI(gf.walletFile); err != nil {
		return err
	} else if uri != "" {
		if gf.paymentTTL < time.Second {
			return fmt.Errorf("--payment-ttl %v: want at least 1s", gf.paymentTTL)
		}
		proc, _, closeWallet, err := walletPMI(uri, a.log, gf.paymentTTL)
		if err != nil {
			return err
		}
		defer closeWallet()
		if len(prices) == 0 {
			a.log.Warn("a wallet but no --price: nothing is charged")
		}
		gate = cep8.NewGate(cep8.Options{Processors: []payments.Processor{proc}})
		processor = proc
	}
	ctx := cmd.Context()

	// The ids of executed requests survive a restart: a replay then never
	// runs twice. One store per server key, so that gateways with other
	// keys may share the directory, and one process per key. With --nats
	// they live in the replica group's bucket instead. Taken before the
	// upstream is started: a gateway that may not run starts nobody's
	// program.
	replicas, closeNATS, err := gf.replica.connect(ctx, a)
	if err != nil {
		return err
	}
	defer closeNATS()
	var state durable.Store
	if replicas == nil {
		dataDir, err := a.dataSubdir(gf.data, "gateway")
		if err != nil {
			return err
		}
		st, err := durable.Open(dataDir, id.secret.Public().Hex(), durable.Options{})
		if errors.Is(err, durable.ErrLocked) {
			return fmt.Errorf("another cvm gateway with this key already runs on %s; stop it, or give this one another --key or --data, or make them replicas with --nats", dataDir)
		}
		if err != nil {
			return fmt.Errorf("gateway state: %w", err)
		}
		defer st.Close()
		state = st
	}
	// Start the upstream once before serving anyone: a command that is not
	// found or exits at once is reported now, not to the first client.
	startCtx, cancel := context.WithTimeout(ctx, opts.InitializeTimeout)
	defer cancel()
	res, err := gateway.Check(startCtx, upstream, opts.InitializeTimeout)
	if err != nil {
		return fmt.Errorf("%w; %s", err, hint)
	}
	if gf.name == "" && res.ServerInfo != nil {
		gf.name = serverInfoName(res.ServerInfo.Title, res.ServerInfo.Name)
	}
	var coordinator contextvm.Coordinator // nil, not a nil *replica.Group, without --nats
	if replicas != nil {
		coordinator = replicas
	}
	opts.Server = contextvm.ServerOptions{
		Replicas:           coordinator,
		State:              state,
		Transfers:          contextvm.TransferLimits{MaxPeerBytes: gf.transferBytes},
		SessionRate:        gf.sessionRate,
		SessionBurst:       gf.sessionBurst,
		Signer:             contextvm.NewKeySigner(id.secret),
		Relays:             gf.relays,
		AllowedClients:     allowed,
		PublicCapabilities: public,
		Encryption:         enc,
		GiftWrap:           wrap,
		Info:               contextvm.ServerInfo{Name: gf.name, About: gf.about, Website: gf.website, Picture: gf.pict},
		InjectClientPubkey: gf.injectClientPubkey,
		Announce:           gf.announce,
		AnnounceRelays:     announceRelays,
		Prices:             prices,
		Gate:               gate,
		CommonTools:        gf.commonTools,
		ToolCategories:     gf.cats,
		UnannounceOnClose:  gf.unannounceOnExit,
		Logger:             a.log,
	}
	opts.NoNostr = gf.noNostr
	// Starting is waiting for a relay, and in shared mode for the upstream
	// session too.
	wait := relayWait
	if opts.Mode == gateway.Shared {
		wait += opts.InitializeTimeout
	}
	newCtx, cancelNew := context.WithTimeout(ctx, wait)
	defer cancelNew()
	gw, err := gateway.New(newCtx, opts)
	switch {
	case errors.Is(err, gateway.ErrUpstream):
		return fmt.Errorf("%w; %s", err, hint)
	case err != nil:
		return noRelay(gf.relays, wait, err)
	}
	defer gw.Close()
	srv := gw.Server()
	pk := id.secret.Public()

	var httpURL, serverDID string
	if gf.httpAddr != "" {
		// The HTTP endpoint keeps its nonces and quotations where the
		// server keeps its state: with --nats, in the group's bucket, so
		// that a request signed for the gateway's DID is accepted once by
		// the whole group and a quotation is spent once.
		httpState := state
		if httpState == nil && srv != nil {
			httpState = srv.State()
		}
		httpPay, err := httpPayments(httpState, processor, prices, didauth.Caller, a.log)
		if err != nil {
			return err
		}
		serverDID = did.NostrDID(pk)
		h := &deferredHandler{}
		hs, err := httpserve.Listen(gf.httpAddr, h, nil)
		if err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		defer hs.Shutdown(context.Background())
		httpURL = "http://" + hs.Addr.String() + gateway.MCPPath
		// Signed for this endpoint, by whatever name the client reached
		// it, or for the gateway's DID.
		audiences := []string{httpURL, serverDID}
		if host, port, err := net.SplitHostPort(gf.httpAddr); err == nil && host != "" && port != "0" {
			audiences = append(audiences, "http://"+gf.httpAddr+gateway.MCPPath)
		}
		auth, err := httpAuth(httpState, gf, audiences, a.log)
		if err != nil {
			return err
		}
		doc, err := didDocument(id.secret, httpURL)
		if err != nil {
			return err
		}
		h.set(gw.HTTPHandler(gateway.HTTPOptions{
			Auth:         auth,
			Caller:       didauth.Caller,
			Payments:     httpPay,
			InjectCaller: gf.injectClientPubkey,
			DIDDocument:  doc,
		}))
		if len(public) > 0 {
			a.log.Warn("--public does not open capabilities over --http yet: only --allow callers are served there")
		}
	}

	var metricsURL string
	if gf.metrics != "" {
		metrics, err := httpserve.Listen(gf.metrics, gw.Handler(), nil)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		defer metrics.Shutdown(context.Background())
		metricsURL = "http://" + metrics.Addr.String() + "/metrics"
	}

	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx) }()

	relays := []string{}
	if srv != nil {
		relays = srv.Relays()
	}
	ready := struct {
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
	}{true, pk.Hex(), nostrx.EncodeNpub(pk), relays, opts.Mode.String(), describe, metricsURL, gf.announce, httpURL, serverDID}
	if err := a.printJSON(ready); err != nil {
		return err
	}
	a.log.Info("gateway serving", "npub", ready.Npub, "mode", ready.Mode, "upstream", describe, "relays", ready.Relays)
	if replicas != nil {
		a.log.Info("serving as a replica", "replica", replicas.Status().Member, "nats", gf.replica.natsURL)
	}

	select {
	case <-ctx.Done():
		a.log.Info("shutting down")
	case err := <-served:
		return fmt.Errorf("gateway stopped: %w", err)
	}
	// The gateway stops its server (which answers what is in flight with
	// an error, and deletes the announcements if asked to), then the
	// upstream sessions.
	gw.Close()
	if err := <-served; err != nil && !errors.Is(err, gateway.ErrClosed) && !errors.Is(err, context.Canceled) {
		a.log.Debug("serve ended", "err", err)
	}
	return nil
}

// gatewayUpstream reads the upstream from the command line: COMMAND after
// --, or --upstream-url.
func (a *app) gatewayUpstream(cmd *cobra.Command, args []string, gf gatewayFlags) (gateway.Upstream, string, error) {
	dash := cmd.ArgsLenAtDash()
	switch {
	case len(args) > 0 && dash != 0:
		return nil, "", fmt.Errorf("put the upstream command after --, as in: cvm gateway [flags] -- %s", strings.Join(args, " "))
	case len(args) > 0 && gf.upstreamURL != "":
		return nil, "", errors.New("give either a command after -- or --upstream-url, not both")
	case gf.upstreamURL != "" && len(gf.passEnv) > 0:
		return nil, "", errors.New("--pass-env is for an upstream command, not --upstream-url")
	case gf.upstreamURL != "":
		if !strings.HasPrefix(gf.upstreamURL, "http://") && !strings.HasPrefix(gf.upstreamURL, "https://") {
			return nil, "", fmt.Errorf("--upstream-url %q: want an http:// or https:// URL", gf.upstreamURL)
		}
		return &gateway.HTTP{URL: gf.upstreamURL}, gf.upstreamURL, nil
	case len(args) == 0:
		return nil, "", errors.New("no upstream MCP server: give one as cvm gateway [flags] -- COMMAND [ARGS…], or --upstream-url URL")
	}
	for _, kv := range gf.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, "", fmt.Errorf("-e %q: want KEY=VALUE", kv)
		}
	}
	if err := secretenv.CheckPass(gf.passEnv); err != nil {
		return nil, "", err
	}
	c := &gateway.Command{Path: args[0], Args: args[1:], Env: gf.env, PassEnv: gf.passEnv, Stderr: a.stderr}
	if err := c.LookPath(); err != nil {
		return nil, "", err
	}
	return c, strings.Join(args, " "), nil
}

func (a *app) gatewayOptions(gf gatewayFlags) (gateway.Options, error) {
	mode, err := gateway.ParseSessionMode(gf.mode)
	if err != nil {
		return gateway.Options{}, fmt.Errorf("--session-mode: %w", err)
	}
	idle := gf.idleTimeout
	if idle == 0 {
		idle = -1
	}
	if gf.maxSessions < 1 {
		return gateway.Options{}, fmt.Errorf("--max-sessions %d: want at least 1", gf.maxSessions)
	}
	reserve := gf.sessionReserve
	switch {
	case reserve < 0 || reserve > gf.maxSessions && reserve != admission.DefaultReserve:
		return gateway.Options{}, fmt.Errorf("--session-reserve %d: want 0 to --max-sessions (%d)", reserve, gf.maxSessions)
	case reserve == 0:
		reserve = -1 // none: the library's zero is its default
	case reserve == admission.DefaultReserve:
		reserve = 0 // the library's default, which takes at most half of a small --max-sessions
	}
	return gateway.Options{
		Mode:             mode,
		MaxSessions:      gf.maxSessions,
		SessionReserve:   reserve,
		IdleTimeout:      idle,
		IsolateStateless: gf.isolateStateless,
		ClientInfo:       &mcp.Implementation{Name: "cvm-gateway", Version: currentVersion().Version},
		// npx fetching a server on first use takes a while.
		InitializeTimeout: 60 * time.Second,
		Logger:            a.log,
	}, nil
}

// access reads --allow and --public into what the contextvm server
// enforces: a refused request is answered there and never reaches the
// upstream.
func (a *app) access(gf gatewayFlags) (allowed []nostr.PubKey, public []contextvm.Capability, err error) {
	keys, dids, err := splitAllow(gf.allow)
	if err != nil {
		return nil, nil, err
	}
	if len(dids) > 0 && gf.httpAddr == "" {
		return nil, nil, fmt.Errorf("--allow %s: a DID other than did:nostr can only call over --http; give --http ADDR, or the client's Nostr key", clip(dids[0], 80))
	}
	for _, s := range keys {
		pk, err := nostrx.ParsePublicKey(s)
		if err != nil {
			return nil, nil, fmt.Errorf("--allow: %w", err)
		}
		allowed = append(allowed, pk.Key)
	}
	for _, s := range gf.public {
		c, err := contextvm.ParseCapability(strings.TrimSpace(s))
		if err == nil && !strings.Contains(c.Method, "/") && c.Method != "ping" {
			err = fmt.Errorf("capability %q: %q is not an MCP method; want METHOD[:NAME], e.g. tools/list or tools/call:get_weather", s, c.Method)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--public: %w", err)
		}
		public = append(public, c)
	}
	if len(allowed) == 0 && len(dids) > 0 {
		// Only DIDs other than did:nostr are allowed, which cannot sign
		// over Nostr: the Nostr server still serves only --allow (and
		// --public), so it gets an allow-list nobody is on. The zero key
		// is no point of the curve: nobody can sign as it.
		allowed = []nostr.PubKey{{}}
	}
	if len(public) > 0 && len(allowed) == 0 {
		a.log.Warn("--public has no effect without --allow: every client may use everything")
	}
	return allowed, public, nil
}

func serverInfoName(title, name string) string {
	if title != "" {
		return title
	}
	return name
}
