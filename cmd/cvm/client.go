package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// defaultRelay is where `cvm relay` listens by default, so that a relay, a
// gateway and a client started on one machine find each other unconfigured.
const defaultRelay = "ws://127.0.0.1:7777"

// relayWait bounds the wait for a first relay to answer a subscription.
// A relay that is up answers in milliseconds; a missing one is reported
// without making the user sit through the whole --timeout.
const relayWait = 10 * time.Second

// clientFlags are the flags of every command that talks to a ContextVM
// server.
type clientFlags struct {
	relays          []string
	discoveryRelays []string
	key             string
	encryption      string
	timeout         time.Duration
	// stateless forces CEP-35 stateless requests; stateful forbids them.
	// Neither: one-shot commands go stateless when the server is known to
	// take it, cvm proxy stays stateful.
	stateless, stateful bool
	pay                 *cep8.PayOptions // payments the client may make (pay.go)
	// didKey is a DID key file (0600) to sign HTTP requests with instead
	// of the Nostr identity.
	didKey string
	// authCompat signs HTTP requests the way @nuwa-ai/identity-kit 0.6.0
	// does, for servers that accept nothing else.
	authCompat bool
}

// addRelayFlag adds --relay, shared through the "relays" configuration key
// by every command that uses relays.
func addRelayFlag(cmd *cobra.Command, relays *[]string) {
	f := cmd.Flags()
	f.StringSliceVar(relays, "relay", []string{defaultRelay}, "relay URL (repeatable, or comma-separated)")
	config.Bind(f, "relay", "relays")
}

func (a *app) addClientFlags(cmd *cobra.Command, cf *clientFlags, timeout time.Duration) {
	addRelayFlag(cmd, &cf.relays)
	addDiscoveryRelayFlag(cmd, &cf.discoveryRelays)
	f := cmd.Flags()
	f.StringVar(&cf.key, "key", "", "secret key file (default: the configured identity, else a throwaway key)")
	f.StringVar(&cf.encryption, "encryption", "optional", "encryption: optional, required or disabled")
	f.DurationVar(&cf.timeout, "timeout", timeout, "how long to wait for each answer (progress notifications restart the clock)")
	f.StringVar(&cf.didKey, "did-key", "", "for an http(s):// server: sign requests with this DID key file (mode 0600) instead of the identity's did:nostr")
	f.BoolVar(&cf.authCompat, "auth-compat", false, "for an http(s):// server: sign as @nuwa-ai/identity-kit 0.6.0 does (for servers that take nothing else; nested params and the audience go unsigned)")
	config.Bind(f, "encryption", "encryption")
	config.Bind(f, "timeout", "timeout")
}

// addDiscoveryRelayFlag adds --discovery-relay, where servers' relay lists
// and announcements are looked up (config key "discovery-relays").
func addDiscoveryRelayFlag(cmd *cobra.Command, relays *[]string) {
	f := cmd.Flags()
	f.StringSliceVar(relays, "discovery-relay", nil, "relay URL where servers' relay lists and announcements are looked up (repeatable; default: the configured relays)")
	config.Bind(f, "discovery-relay", "discovery-relays")
}

// addModeFlags adds --stateless and, for one-shot commands, --stateful.
func addModeFlags(cmd *cobra.Command, cf *clientFlags, oneShot bool) {
	f := cmd.Flags()
	f.BoolVar(&cf.stateless, "stateless", false, "send requests without an MCP session (CEP-35): one round trip fewer")
	if oneShot {
		f.BoolVar(&cf.stateful, "stateful", false, "open an MCP session first even when the server takes stateless requests")
		cmd.MarkFlagsMutuallyExclusive("stateless", "stateful")
	}
}

// discoveryRelays returns --discovery-relay checked and normalized, or the
// configured relays when it is not set.
func (cf clientFlags) discoveryRelayURLs() ([]string, error) {
	if len(cf.discoveryRelays) == 0 {
		return cf.relays, nil
	}
	var out []string
	for _, u := range cf.discoveryRelays {
		p, err := nostrx.ParseRelayURL(nostrx.NormalizeRelayURL(u))
		if uerr := (*nostrx.RelayURLError)(nil); errors.As(err, &uerr) {
			return nil, fmt.Errorf("--discovery-relay %q: %s; give a relay URL such as wss://relay.example", clip(u, 80), uerr.Reason)
		} else if err != nil {
			return nil, fmt.Errorf("--discovery-relay %q: %w", clip(u, 80), err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// target is a server named on the command line: its key, where it
// listens and how that is known, and its announcement when one was read.
type target struct {
	arg       string
	key       nostrx.PublicKey
	loc       discovery.Location
	discovery []string
}

// locate resolves SERVER and finds its relays (CEP-17): a --relay given on
// the command line is used as it is; else an nprofile's hints; else the
// server's relay list, cached or looked up on the discovery relays; else
// the configured relays. Where they came from is said on stderr when it
// is not the person's own words: not of relays given with --relay, nor of
// the configured ones when the server has no relay list (at debug only;
// a failure names the relays it tried).
func (a *app) locate(ctx context.Context, cf clientFlags, serverArg string) (target, error) {
	server, err := a.resolveServer(ctx, serverArg)
	if err != nil {
		return target{}, err
	}
	disc, err := cf.discoveryRelayURLs()
	if err != nil {
		return target{}, err
	}
	var given []string
	if a.source("relays") == config.Flag {
		given = cf.relays
	}
	var cache *discovery.RelayCache
	if dir, err := config.CacheDir(a.getenv); err == nil {
		cache = discovery.OpenRelayCache(filepath.Join(dir, "relays.json"), discovery.RelayCacheOptions{})
	}
	wait := min(discovery.DefaultLocateTimeout, relayWaitFor(cf.timeout))
	loc, err := discovery.Locate(ctx, server, discovery.LocateOptions{
		Relays: given, DiscoveryRelays: disc, Fallback: cf.relays, Cache: cache, Timeout: wait, Logger: a.log,
	})
	if err != nil {
		return target{}, err
	}
	if loc.Source == discovery.FromFallback && errors.Is(loc.LookupErr, discovery.ErrLookupUnanswered) && subset(loc.Relays, disc) {
		// The relays to try next are the ones that just did not answer.
		return target{}, noRelay(loc.Relays, wait, nil)
	}
	switch {
	case loc.Source == discovery.FromGiven:
	case loc.Source == discovery.FromFallback && loc.List.Dropped == 0:
		// No relay list: the configured relays, as before there were
		// relay lists. Worth a line only to someone debugging (a failed
		// call names the relays it tried); a list with nothing usable in
		// it is another matter, said below.
		a.log.Debug(loc.Explain(), "server", nostrx.EncodeNpub(server.Key), "relays", loc.Relays, "source", string(loc.Source))
	default:
		a.log.Info(loc.Explain(), "server", nostrx.EncodeNpub(server.Key), "relays", loc.Relays, "source", string(loc.Source))
	}
	return target{arg: serverArg, key: server, loc: loc, discovery: disc}, nil
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// source says which layer a setting came from.
func (a *app) source(key string) config.Source {
	for _, s := range a.settings {
		if s.Key == key {
			return s.Source
		}
	}
	return config.Default
}

// resolveServer reads SERVER: an alias from [servers] in the config file,
// a public key as hex, npub or nprofile, or a NIP-05 name@domain
// (nip05.go).
func (a *app) resolveServer(ctx context.Context, arg string) (nostrx.PublicKey, error) {
	target := arg
	if alias, ok := a.file.Table("servers")[arg]; ok {
		target = alias
	}
	if isNIP05(target) {
		return a.resolveNIP05(ctx, target)
	}
	return a.resolveServerKey(arg)
}

// resolveServerKey is resolveServer without NIP-05: where a name must
// not be looked up (an allow-list is keys the person chose).
func (a *app) resolveServerKey(arg string) (nostrx.PublicKey, error) {
	target := arg
	alias, isAlias := a.file.Table("servers")[arg]
	if isAlias {
		target = alias
	}
	pk, err := nostrx.ParsePublicKey(target)
	switch {
	case err == nil:
		return pk, nil
	case isAlias:
		return pk, fmt.Errorf("server alias %q in %s: %w", arg, a.file.Path, err)
	case !looksLikeKey(arg):
		return pk, fmt.Errorf("unknown server %q: not a public key (hex, npub or nprofile), a NIP-05 name@domain, or an alias in [servers] of %s", arg, a.file.Path)
	default:
		return pk, fmt.Errorf("server: %w", err)
	}
}

// looksLikeKey tells a mistyped key, whose parse error says what is wrong
// with it, from a name that is no key at all, most likely a missing alias.
func looksLikeKey(s string) bool {
	s = strings.TrimPrefix(strings.TrimSpace(s), "nostr:")
	for _, prefix := range []string{"npub1", "nprofile1", "nsec1"} {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return len(s) == 64
}

// clientOptions resolves the identity and the flags into the options of a
// client transport to the located server.
func (a *app) clientOptions(cf clientFlags, tg target) (contextvm.ClientOptions, error) {
	server := tg.key
	enc, err := contextvm.ParseEncryptionMode(cf.encryption)
	if err != nil {
		return contextvm.ClientOptions{}, fmt.Errorf("--encryption: %w", err)
	}
	id, err := a.resolveIdentity(cf.key, clientKey)
	if err != nil {
		return contextvm.ClientOptions{}, err
	}
	signer := contextvm.NewKeySigner(id.secret)
	if id.pubkey() == server.Key && cf.pay != nil && cf.pay.Channel != nil {
		// A channel is the identity's: a throwaway key would strand it.
		return contextvm.ClientOptions{}, fmt.Errorf("your identity (%s) is the server's own; a payment channel needs a key of its own: give --key FILE (cvm keygen --out FILE)", id.origin)
	}
	if id.pubkey() == server.Key {
		// A gateway and a client started on one machine share the default
		// identity; a client with the server's own key hears its own
		// requests, and the server hears itself.
		a.log.Debug("your identity is the server's own; using a throwaway key to call it", "identity", id.origin)
		signer = contextvm.NewKeySigner(nostr.Generate())
	}
	return contextvm.ClientOptions{
		// The npub, not the nprofile: its hints are in the location
		// already, or were overruled by --relay.
		Server:         nostrx.EncodeNpub(server.Key),
		Relays:         tg.loc.Relays,
		Stateless:      cf.stateless,
		Signer:         signer,
		Encryption:     enc,
		RequestTimeout: cf.timeout,
		Payer:          cf.pay.Payer(),
		Logger:         a.log,
	}, nil
}

// errNoRelay marks a client that no relay answered: a local problem (exit
// 2), the request never left.
var errNoRelay = errors.New("no relay answered")

// relayStage bounds the transport's Connect (which waits for a relay to
// confirm the subscription) and marks its failure.
type relayStage struct {
	t      mcp.Transport
	relays []string
	wait   time.Duration
}

func (r relayStage) Connect(ctx context.Context) (mcp.Connection, error) {
	ctx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	conn, err := r.t.Connect(ctx)
	if err != nil {
		return nil, noRelay(r.relays, r.wait, err)
	}
	return conn, nil
}

// noRelay explains that no relay answered; err is left out when it only
// says that time ran out.
func noRelay(relays []string, wait time.Duration, err error) error {
	msg := fmt.Errorf("%w within %s (%s): is the relay running? give another with --relay URL", errNoRelay, wait, strings.Join(relays, ", "))
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		return msg
	}
	return fmt.Errorf("%w: %w", msg, err)
}

// relayWaitFor is how long a command with --timeout waits for a relay.
func relayWaitFor(timeout time.Duration) time.Duration {
	if timeout > 0 {
		return min(relayWait, timeout)
	}
	return relayWait
}

// remoteFailure describes a request the server failed or never answered;
// the command exits with status 1. A command stopped while it waited (a
// signal: ctx is the command's) says what it was waiting for.
func remoteFailure(ctx context.Context, what, server string, relays []string, err error) error {
	var werr *jsonrpc.Error
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return remote(fmt.Errorf("%s: stopped waiting for %s to answer, on %s (%v)", what, server, strings.Join(relays, ", "), context.Cause(ctx)))
	}
	if !errors.As(err, &werr) {
		return remote(fmt.Errorf("%s: %w", what, err))
	}
	// The transport's own timeout message repeats what was asked.
	trimmed := &jsonrpc.Error{Code: werr.Code, Message: strings.TrimPrefix(werr.Message, "contextvm: "+strings.Fields(what)[0]+": "), Data: werr.Data}
	hint := ""
	if werr.Code == contextvm.CodeRequestTimeout {
		hint = fmt.Sprintf("; is %s running and on %s? (see --relay and --timeout)", server, strings.Join(relays, ", "))
	}
	return remote(fmt.Errorf("%s: %w (code %d)%s", what, trimmed, werr.Code, hint))
}
