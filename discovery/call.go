package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrNoProvider means no server offers a verified implementation of the
// schema.
var ErrNoProvider = errors.New("no server implements this common schema")

// CallOptions configure Call.
type CallOptions struct {
	// SchemaHash is the common schema to call.
	SchemaHash string
	// Tool, if set, must be the name of the tool the schema describes (the
	// hash covers the name, so every provider's tool has the same one).
	Tool      string
	Arguments any

	// Pool finds the providers. Catalog, if set, is used instead of reading
	// the announcements from Pool.
	Pool    *nostrx.Pool
	Catalog *Catalog

	// Client configures the connection to each provider. Server is set per
	// provider, and the provider's relay list and Pool's relays are added to
	// Relays.
	Client contextvm.ClientOptions
	// AttemptTimeout bounds each provider's connection and call (default
	// 30 s).
	AttemptTimeout time.Duration
	// History ranks the providers and records the outcomes (nil: no
	// memory between calls).
	History *History
	// Policy and Trusted decide which providers may be called, and rank
	// them (see Choose). The zero Policy, TrustedOnly, calls only the
	// Trusted keys.
	Policy  TrustPolicy
	Trusted map[nostr.PubKey]bool
	// Reputation ranks the providers after trust and before price, and
	// admits strangers under ByReputation (nil: none).
	Reputation Reputation
	// Progress, if set, is told of the progress notifications the
	// providers send for the call (and of the client's own, such as a
	// payment asked for).
	Progress func(context.Context, *mcp.ProgressNotificationParams)

	Logger *slog.Logger
}

// Attempt is one provider tried.
type Attempt struct {
	Provider Provider
	Elapsed  time.Duration
	Err      error
}

// CallResult is the outcome of Call.
type CallResult struct {
	Result   *mcp.CallToolResult
	Provider Provider
	Attempts []Attempt
}

// Call calls the tool of a common schema on the best provider the trust
// policy allows, in the order Choose gives, failing over to the next when a
// provider cannot be reached, does not answer in time, answers with a
// protocol error, or does not serve the schema its announcement claims:
// before the arguments are sent, the provider's live tools/list is read and
// the tool's schemas must still hash to SchemaHash (ErrClaimNotServed). A tool's own
// error result (isError) and invalid arguments (-32602) are answers, not
// failures: they would be the same elsewhere, and trying elsewhere would run
// the call twice.
//
// A payment the caller's Payer declined (CodePaymentDeclined: over its
// cap or a budget, refused by a person, the wallet failing) is the
// caller's, not the provider's: it is not recorded as the provider's
// failure, and the call stops there, since the next provider would be
// declined too, unless the decline was for the amount (no cap, over the
// cap or a daily limit): then only the providers after it that announce a
// lower price in the same unit, or none, are tried, each declined in turn
// if still too dear. A payment request the client could not read
// (DeclinedMalformed) is the provider's failure.
//
// A provider whose key is the caller's own is called with a throwaway key.
//
// A provider that times out may still have run the call; failing over can
// therefore run it again on the next one. Do not fail over calls that must
// run at most once: give a single provider (Catalog) instead.
func Call(ctx context.Context, opts CallOptions) (*CallResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 30 * time.Second
	}
	catalog := opts.Catalog
	if catalog == nil {
		if opts.Pool == nil {
			return nil, errors.New("discovery: CallOptions needs a Pool or a Catalog")
		}
		var err error
		if catalog, err = Fetch(ctx, opts.Pool, Filter{SchemaHash: opts.SchemaHash}); err != nil {
			return nil, err
		}
	}
	providers, excluded := catalog.Providers(opts.SchemaHash, Ranking{Policy: opts.Policy, Trusted: opts.Trusted, History: opts.History, Reputation: opts.Reputation})
	switch {
	case len(providers) == 0 && excluded > 0:
		return nil, fmt.Errorf("discovery: %w: %d untrusted server(s) implement %s", ErrNoTrustedProvider, excluded, opts.SchemaHash)
	case len(providers) == 0:
		return nil, fmt.Errorf("discovery: %w: %s", ErrNoProvider, opts.SchemaHash)
	}
	if opts.Tool != "" && providers[0].Tool.Name != opts.Tool {
		return nil, fmt.Errorf("discovery: schema %s describes the tool %q, not %q", opts.SchemaHash, providers[0].Tool.Name, opts.Tool)
	}
	res := &CallResult{}
	var declined error // the last payment declined
	for i := 0; i < len(providers); i++ {
		p := providers[i]
		start := time.Now()
		result, err := callOne(ctx, opts, p)
		elapsed := time.Since(start)
		res.Attempts = append(res.Attempts, Attempt{Provider: p, Elapsed: elapsed, Err: err})
		if d, ok := callerDeclined(err); ok {
			declined = err
			providers = append(providers[:i+1], cheaper(providers[i+1:], d)...)
			log.Debug("payment declined; trying only cheaper providers", "server", p.Server.Npub, "amount", d.Amount, "unit", d.Unit, "reason", d.Reason, "left", len(providers)-i-1)
			if ctx.Err() != nil {
				return res, err
			}
			continue
		}
		if err == nil || !failover(err) {
			if err == nil {
				opts.History.Succeeded(p.Server.Pubkey, elapsed, time.Now())
			}
			res.Result, res.Provider = result, p
			return res, err
		}
		opts.History.Failed(p.Server.Pubkey, time.Now())
		log.Info("provider failed; trying the next", "server", p.Server.Npub, "name", p.Server.Name, "err", err)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	last := res.Attempts[len(res.Attempts)-1].Err
	if declined != nil && last != declined {
		// The payment, not the providers, is what kept the call from
		// being made.
		return res, fmt.Errorf("%w (a cheaper provider failed too: %v)", declined, last)
	}
	if declined != nil {
		return res, declined
	}
	return res, fmt.Errorf("discovery: all %d providers failed; the last: %w", len(providers), last)
}

// callerDeclined reads a payment the caller declined to make, which is
// no failure of the provider's.
func callerDeclined(err error) (contextvm.DeclinedData, bool) {
	d, ok := contextvm.Declined(err)
	return d, ok && d.Reason != contextvm.DeclinedMalformed
}

// amountReasons are the declines that a lower price could avoid.
var amountReasons = []string{contextvm.DeclinedNoPayments, contextvm.DeclinedNoCap, contextvm.DeclinedOverCap, contextvm.DeclinedOverDaily}

// cheaper are those of providers that announce a price lower than the
// amount d declined, in its unit, or none; none of them when d was not
// declined for the amount.
func cheaper(providers []Provider, d contextvm.DeclinedData) []Provider {
	if !slices.Contains(amountReasons, d.Reason) {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(providers), func(p Provider) bool {
		price := p.Tool.Price
		if price == nil {
			return false // free
		}
		unit := cmp.Or(price.Unit, contextvm.DefaultPriceUnit)
		return unit != d.Unit || price.High() >= float64(d.Amount)
	})
}

func callOne(ctx context.Context, opts CallOptions, p Provider) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.AttemptTimeout)
	defer cancel()
	co := opts.Client
	co.Server = p.Server.Pubkey.Hex()
	// The provider's own relays and ours: a dead relay costs nothing, a
	// missing one can cost the call.
	relays := slices.Concat(p.Server.Relays, co.Relays)
	if opts.Pool != nil {
		relays = append(relays, opts.Pool.Relays()...)
	}
	co.Relays, co.Pool = relays, nil
	if co.Signer != nil {
		// A client with the server's own key cannot reach it (a gateway and
		// a client on one machine share the default identity); a fresh key
		// can.
		if me, err := co.Signer.GetPublicKey(ctx); err == nil && me == p.Server.Pubkey {
			co.Signer = contextvm.NewKeySigner(nostr.Generate())
		}
	}
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "cvm", Version: "1"}, ProgressClient(opts.Progress)), co)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	if err := recheck(ctx, cs, p.Tool.Name, opts.SchemaHash); err != nil {
		return nil, err
	}
	params := &mcp.CallToolParams{Name: p.Tool.Name, Arguments: opts.Arguments}
	if opts.Progress != nil {
		params.SetProgressToken(fmt.Sprintf("cvm-%d", time.Now().UnixNano()))
	}
	return cs.CallTool(ctx, params)
}

// ErrClaimNotServed means a provider's live tools/list does not serve the
// common schema its announcement claims: the tool is missing, or its
// schemas hash to something else. The announcement may be stale, or a lure.
var ErrClaimNotServed = errors.New("the server does not serve the schema its announcement claims")

// recheck reads the provider's live tools/list before any argument is sent:
// an announcement is only what the server said once, and the arguments go
// to what it serves now (seed 004 §4.2: verify the tools/list response).
func recheck(ctx context.Context, cs *mcp.ClientSession, name, hash string) error {
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if tool.Name != name {
			continue
		}
		raw, err := json.Marshal(tool)
		if err != nil {
			return err
		}
		var t commonschema.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("%w: its tool %q: %v", ErrClaimNotServed, name, err)
		}
		if err := commonschema.Verify(t, hash); err != nil {
			return fmt.Errorf("%w: %v", ErrClaimNotServed, err)
		}
		return nil
	}
	return fmt.Errorf("%w: its tools/list has no tool %q", ErrClaimNotServed, name)
}

// failover reports whether an error is the provider's rather than the
// call's.
func failover(err error) bool {
	var rpc *jsonrpc.Error
	return !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams
}

// ProgressClient are the options of an MCP client whose progress
// notifications go to progress; nil (no options) for a nil progress.
func ProgressClient(progress func(context.Context, *mcp.ProgressNotificationParams)) *mcp.ClientOptions {
	if progress == nil {
		return nil
	}
	return &mcp.ClientOptions{ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
		progress(ctx, req.Params)
	}}
}
