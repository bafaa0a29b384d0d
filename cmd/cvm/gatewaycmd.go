package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/internal/admission"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type gatewayFlags struct {
	replica replicaFlags // --nats and its companions: gatewayreplicas.go
	rate    rateFlags    // --usd-rate-*: usdrate.go
	profile profileFlags // --profile-*: profile.go

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
	zapAddress                 string
	cashuMints                 []string // mints whose ecash is taken as direct payment
	paymentTTL                 time.Duration
	channels                   bool
	channelIdleTTL             time.Duration

	httpAddr             string
	noNostr, requireAuth bool
	authWindow           time.Duration
	authCompat           bool
}

// gatewayHelp is cvm gateway's long help.
var gatewayHelp = `Expose an MCP server over ContextVM: a stdio server started as COMMAND (after
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
a range MIN-MAX, UNIT sats, the default, or usd) is advertised on the
announcements and on every list answer; with --wallet-file FILE (mode 0600,
or $CVM_WALLET), the receiving wallet's connection URI, they are collected
(CEP-8): a priced request runs only once paid, and is charged at most once.
--zap-address NAME@HOST collects them with only a Lightning address whose
LNURL-pay endpoint publishes zap receipts (NIP-57, allowsNostr), such as
most custodial wallets' addresses: the gateway gets each invoice from it and
settles the payment on the receipt it reads on --relay. A usd price is
asked for in sats, converted at the bitcoin price that --usd-rate-url (a
JSON endpoint) gives at --usd-rate-pointer, kept for --usd-rate-ttl, and
rounded up to a whole sat; without the rate, the call is refused and
nothing is charged. --common-tool NAME
(repeatable) declares a tool as implementing a common schema (CEP-15): its
schema hash goes into its _meta and the announcement's tags, with each
--category. When the wallet is a Lightning (NIP-47) one that may
pay_invoice, the gateway also offers prepaid payment channels (pmi
bitcoin-lightning-channel-v1): a client pays one deposit, then many calls
without an invoice; what it did not spend is paid back when it closes the
channel, or is owed once the channel was idle for --channel-idle-ttl.
--channels=false offers none; nor does a replica group (--nats), whose
replicas could not agree on a channel's receipts. --unannounce-on-exit
deletes the announcements at shutdown; cvm unannounce does it any time.

--profile-name, --profile-about, --profile-picture, --profile-website,
--profile-nip05 and --profile-lud16 (or a [profile] table in the config)
publish the server's profile (kind 0, CEP-23) signed by its key, at start
when the relays have another one; cvm unannounce deletes it, cvm note
publishes a note (kind 1) as the server.

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
it down, answering what is in flight with an error.`

// add defines cvm gateway's flags (not --relay, nor those of replicas).
func (gf *gatewayFlags) add(f *pflag.FlagSet) {
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
	f.StringArrayVar(&gf.cashuMints, "cashu-mint", nil, "take Cashu ecash of this mint as direct payment of the prices, kept in the gateway's own Cashu wallet under --data (repeatable)")
	f.StringVar(&gf.zapAddress, "zap-address", "", "collect the prices as zaps (NIP-57) to this Lightning address, NAME@HOST, with no wallet connection")
	f.DurationVar(&gf.paymentTTL, "payment-ttl", lightning.DefaultTTL, "how long a payment request (a Lightning invoice) can be paid")
	f.BoolVar(&gf.channels, "channels", true, "offer prepaid payment channels when the wallet may pay_invoice (--channels=false: never)")
	f.DurationVar(&gf.channelIdleTTL, "channel-idle-ttl", channel.DefaultIdleTTL, "close a payment channel this long after its last paid call; what is left is owed to the client")
	f.StringVar(&gf.httpAddr, "http", "", "also serve MCP streamable HTTP on this address, e.g. 127.0.0.1:8080 (endpoint /mcp)")
	f.BoolVar(&gf.noNostr, "no-nostr", false, "serve over --http only, not over Nostr")
	f.BoolVar(&gf.requireAuth, "require-auth", false, "over --http, refuse requests not signed with a DID (401)")
	f.DurationVar(&gf.authWindow, "auth-window", didauth.DefaultWindow, "over --http, how far a signed request's timestamp may be from now, either way")
	f.BoolVar(&gf.authCompat, "auth-compat", false, "over --http, also accept @nuwa-ai/identity-kit 0.6.0's DIDAuthV1 headers, which do not cover nested params or an audience (see docs/protocol-compatibility.md)")
	f.StringArrayVar(&gf.commonTools, "common-tool", nil, "declare a tool as implementing a common schema (repeatable)")
	f.StringArrayVar(&gf.cats, "category", nil, "a category for the common tools' announcement (repeatable)")
}

// gatewayCmd is one run of cvm gateway: the invocation's app and the
// command's flags.
type gatewayCmd struct {
	*app
	gf gatewayFlags
	// httpChannels are the gateway's prepaid payment channels, offered
	// over --http too: set where the wallet is opened, only when it may
	// pay_invoice (the refunds).
	httpChannels *channel.Books
}

func (a *app) gatewayCommand() *cobra.Command {
	var gf gatewayFlags
	cmd := &cobra.Command{
		Use:   "gateway [flags] -- COMMAND [ARGS…] | gateway [flags] --upstream-url URL",
		Short: "Put an MCP server on Nostr",
		Long:  gatewayHelp,
		Example: `  cvm gateway -- npx -y @modelcontextprotocol/server-everything
  cvm gateway --session-mode shared --upstream-url http://127.0.0.1:3001/mcp
  cvm gateway --allow npub1… --public tools/list -- ./my-server --flag
  cvm gateway --announce --price tool:translate=10 --common-tool translate -- ./translator`,
		RunE: func(cmd *cobra.Command, args []string) error { return (&gatewayCmd{app: a, gf: gf}).run(cmd, args) },
	}
	addRelayFlag(cmd, &gf.relays)
	f := cmd.Flags()
	gf.add(f)
	gf.replica.add(f)
	addRateFlags(cmd, &gf.rate, false)
	gf.profile.add(f)
	cmd.Long += replicaHelp
	for _, name := range []string{"key", "encryption", "gift-wrap", "allow", "public", "name", "about", "website", "picture",
		"session-mode", "env", "pass-env", "upstream-url", "inject-client-pubkey", "metrics", "data", "max-transfer-bytes", "max-sessions", "session-reserve", "session-rate", "session-burst", "idle-timeout", "isolate-stateless",
		"announce", "announce-relay", "unannounce-on-exit", "price", "payment-ttl", "common-tool", "category", "http", "no-nostr", "require-auth", "auth-window", "auth-compat"} {
		config.Bind(f, name, "gateway."+name)
	}
	for _, name := range []string{"channels", "channel-idle-ttl"} {
		config.Bind(f, name, "payments."+name)
	}
	config.Bind(f, "zap-address", "payments.zap-address")
	config.Bind(f, "cashu-mint", "payments.cashu-mint")
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

// upstream reads the upstream from the command line: COMMAND after
// --, or --upstream-url.
func (g *gatewayCmd) upstream(cmd *cobra.Command, args []string) (gateway.Upstream, string, error) {
	dash := cmd.ArgsLenAtDash()
	switch {
	case len(args) > 0 && dash != 0:
		return nil, "", fmt.Errorf("put the upstream command after --, as in: cvm gateway [flags] -- %s", strings.Join(args, " "))
	case len(args) > 0 && g.gf.upstreamURL != "":
		return nil, "", errors.New("give either a command after -- or --upstream-url, not both")
	case g.gf.upstreamURL != "" && len(g.gf.passEnv) > 0:
		return nil, "", errors.New("--pass-env is for an upstream command, not --upstream-url")
	case g.gf.upstreamURL != "":
		if !strings.HasPrefix(g.gf.upstreamURL, "http://") && !strings.HasPrefix(g.gf.upstreamURL, "https://") {
			return nil, "", fmt.Errorf("--upstream-url %q: want an http:// or https:// URL", g.gf.upstreamURL)
		}
		return &gateway.HTTP{URL: g.gf.upstreamURL}, g.gf.upstreamURL, nil
	case len(args) == 0:
		return nil, "", errors.New("no upstream MCP server: give one as cvm gateway [flags] -- COMMAND [ARGS…], or --upstream-url URL")
	}
	for _, kv := range g.gf.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, "", fmt.Errorf("-e %q: want KEY=VALUE", kv)
		}
	}
	if err := secretenv.CheckPass(g.gf.passEnv); err != nil {
		return nil, "", err
	}
	c := &gateway.Command{Path: args[0], Args: args[1:], Env: g.gf.env, PassEnv: g.gf.passEnv, Stderr: g.stderr}
	if err := c.LookPath(); err != nil {
		return nil, "", err
	}
	return c, strings.Join(args, " "), nil
}

func (g *gatewayCmd) options() (gateway.Options, error) {
	mode, err := gateway.ParseSessionMode(g.gf.mode)
	if err != nil {
		return gateway.Options{}, fmt.Errorf("--session-mode: %w", err)
	}
	idle := g.gf.idleTimeout
	if idle == 0 {
		idle = -1
	}
	if g.gf.maxSessions < 1 {
		return gateway.Options{}, fmt.Errorf("--max-sessions %d: want at least 1", g.gf.maxSessions)
	}
	reserve := g.gf.sessionReserve
	switch {
	case reserve < 0 || reserve > g.gf.maxSessions && reserve != admission.DefaultReserve:
		return gateway.Options{}, fmt.Errorf("--session-reserve %d: want 0 to --max-sessions (%d)", reserve, g.gf.maxSessions)
	case reserve == 0:
		reserve = -1 // none: the library's zero is its default
	case reserve == admission.DefaultReserve:
		reserve = 0 // the library's default, which takes at most half of a small --max-sessions
	}
	return gateway.Options{
		Mode:             mode,
		MaxSessions:      g.gf.maxSessions,
		SessionReserve:   reserve,
		IdleTimeout:      idle,
		IsolateStateless: g.gf.isolateStateless,
		ClientInfo:       &mcp.Implementation{Name: "cvm-gateway", Version: currentVersion().Version},
		// npx fetching a server on first use takes a while.
		InitializeTimeout: 60 * time.Second,
		Logger:            g.log,
	}, nil
}

// access reads --allow and --public into what the contextvm server
// enforces: a refused request is answered there and never reaches the
// upstream.
func (g *gatewayCmd) access() (allowed []nostr.PubKey, public []contextvm.Capability, err error) {
	keys, dids, err := splitAllow(g.gf.allow)
	if err != nil {
		return nil, nil, err
	}
	if len(dids) > 0 && g.gf.httpAddr == "" {
		return nil, nil, fmt.Errorf("--allow %s: a DID other than did:nostr can only call over --http; give --http ADDR, or the client's Nostr key", clip(dids[0], 80))
	}
	for _, s := range keys {
		pk, err := nostrx.ParsePublicKey(s)
		if err != nil {
			return nil, nil, fmt.Errorf("--allow: %w", err)
		}
		allowed = append(allowed, pk.Key)
	}
	for _, s := range g.gf.public {
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
		g.log.Warn("--public has no effect without --allow: every client may use everything")
	}
	return allowed, public, nil
}

func serverInfoName(title, name string) string {
	if title != "" {
		return title
	}
	return name
}
