package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
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
	relays     []string
	key        string
	encryption string
	timeout    time.Duration
	pay        *contextvm.PayOptions // payments the client may make (pay.go)
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
	f := cmd.Flags()
	f.StringVar(&cf.key, "key", "", "secret key file (default: the configured identity, else a throwaway key)")
	f.StringVar(&cf.encryption, "encryption", "optional", "encryption: optional, required or disabled")
	f.DurationVar(&cf.timeout, "timeout", timeout, "how long to wait for each answer (progress notifications restart the clock)")
	config.Bind(f, "encryption", "encryption")
	config.Bind(f, "timeout", "timeout")
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
// or a public key as hex, npub or nprofile.
func (a *app) resolveServer(arg string) (nostrx.PublicKey, error) {
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
		return pk, fmt.Errorf("unknown server %q: not a public key (hex, npub or nprofile) and not an alias in [servers] of %s", arg, a.file.Path)
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

// clientOptions resolves the server, the identity and the flags into the
// options of a client transport.
func (a *app) clientOptions(cf clientFlags, serverArg string) (contextvm.ClientOptions, error) {
	server, err := a.resolveServer(serverArg)
	if err != nil {
		return contextvm.ClientOptions{}, err
	}
	enc, err := contextvm.ParseEncryptionMode(cf.encryption)
	if err != nil {
		return contextvm.ClientOptions{}, fmt.Errorf("--encryption: %w", err)
	}
	id, err := a.resolveIdentity(cf.key, clientKey)
	if err != nil {
		return contextvm.ClientOptions{}, err
	}
	signer := contextvm.NewKeySigner(id.secret)
	if id.pubkey() == server.Key {
		// A gateway and a client started on one machine share the default
		// identity; a client with the server's own key hears its own
		// requests, and the server hears itself.
		a.log.Debug("your identity is the server's own; using a throwaway key to call it", "identity", id.origin)
		signer = contextvm.NewKeySigner(nostr.Generate())
	}
	relays := cf.relays
	if len(server.Relays) > 0 && a.source("relays") == config.Default {
		relays = nil // an nprofile says where the server is
	}
	return contextvm.ClientOptions{
		Server:         nostrx.EncodeNpub(server.Key),
		Relays:         append(relays, server.Relays...),
		Signer:         signer,
		Encryption:     enc,
		RequestTimeout: cf.timeout,
		Pay:            cf.pay,
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
	if errors.Is(err, context.DeadlineExceeded) {
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

// connect opens an MCP session with a ContextVM server for a one-shot
// command.
func (a *app) connect(ctx context.Context, cf clientFlags, serverArg string, copts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	cs, _, err := a.connectTransport(ctx, cf, serverArg, copts)
	return cs, err
}

// connectTransport is connect, also returning the transport, which knows
// what the server's messages said beside their JSON-RPC content (prices).
func (a *app) connectTransport(ctx context.Context, cf clientFlags, serverArg string, copts *mcp.ClientOptions) (*mcp.ClientSession, *contextvm.ClientTransport, error) {
	opts, err := a.clientOptions(cf, serverArg)
	if err != nil {
		return nil, nil, err
	}
	t, err := contextvm.NewClientTransport(opts)
	if err != nil {
		return nil, nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "cvm", Version: currentVersion().Version}, copts)
	cs, err := client.Connect(ctx, relayStage{t, opts.Relays, relayWaitFor(cf.timeout)}, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		if errors.Is(err, errNoRelay) {
			return nil, nil, err
		}
		return nil, nil, remoteFailure("initialize", serverArg, opts.Relays, err)
	}
	return cs, t, nil
}

// remoteFailure describes a request the server failed or never answered;
// the command exits with status 1.
func remoteFailure(what, server string, relays []string, err error) error {
	var werr *jsonrpc.Error
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
