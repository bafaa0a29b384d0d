package market

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallInput names the tool to call: on one server, or on the best
// provider of a common schema.
type CallInput struct {
	Server    string         `json:"server,omitempty" jsonschema:"a server's npub (from search): call its tool"`
	Schema    string         `json:"schema,omitempty" jsonschema:"a common schema hash (from search): call its tool on the best provider, failing over to the next"`
	Tool      string         `json:"tool" jsonschema:"the tool's name"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the tool's arguments, as its input schema says (see describe)"`
}

// CallMeta is what the market adds to a tool's result, in
// _meta["cvm/market"]: who answered, at what price, what was paid.
type CallMeta struct {
	Server     string            `json:"server"`
	ServerName string            `json:"serverName,omitempty"`
	Price      *discovery.Price  `json:"price,omitempty"`
	Reputation *reputation.Score `json:"reputation,omitempty"`
	Paid       []Payment         `json:"paid"`
	// Failed are the providers tried before, and why.
	Failed []string `json:"failed,omitempty"`
}

// Payment is one payment made for a call.
type Payment struct {
	Server string `json:"server"`
	Amount int64  `json:"amount"`
	Unit   string `json:"unit"`
	PMI    string `json:"pmi"`
}

// MetaKey is the _meta key of a result's CallMeta.
const MetaKey = "cvm/market"

func (m *Market) call(ctx context.Context, req *mcp.CallToolRequest, in CallInput) (*mcp.CallToolResult, any, error) {
	if (in.Server == "") == (in.Schema == "") {
		return nil, nil, errServerOrSchema
	}
	o, err := m.providers(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	if err := checkArguments(o.providers[0].Tool, in.Arguments); err != nil {
		return nil, nil, err
	}
	if err := m.affordable(ctx, o.providers); err != nil {
		return nil, nil, err
	}
	var paid paidLog
	client := m.opts.Client
	client.Payer = m.payer(req, &paid)
	var res *discovery.CallResult
	if o.hash != "" {
		res, err = discovery.Call(ctx, discovery.CallOptions{
			SchemaHash: o.hash, Tool: in.Tool, Arguments: in.Arguments,
			Catalog: o.catalog, Pool: m.opts.Pool, Client: client, AttemptTimeout: m.opts.AttemptTimeout,
			History: m.opts.History, Policy: o.ranking.Policy, Trusted: o.ranking.Trusted, Reputation: o.ranking.Reputation,
			Progress: m.passProgress(req), Logger: m.log,
		})
	} else {
		res, err = m.callServer(ctx, client, o.providers[0], in.Arguments, m.passProgress(req))
	}
	if serr := m.opts.History.Save(); serr != nil {
		m.log.Warn("could not save the provider history", "path", m.opts.History.Path(), "err", serr)
	}
	if err != nil {
		return nil, nil, callError(err, res)
	}
	return withMeta(res, o.scores, paid.list()), nil, nil
}

// providers are who may answer in: the ranked providers of its schema, or
// its one server (and no hash).
func (m *Market) providers(ctx context.Context, in CallInput) (schemaOffer, error) {
	if in.Server != "" {
		s, err := m.lookup(ctx, in.Server)
		if err != nil {
			return schemaOffer{}, err
		}
		i := slices.IndexFunc(s.Tools, func(t discovery.Tool) bool { return t.Name == in.Tool })
		if i < 0 {
			names := make([]string, len(s.Tools))
			for i, t := range s.Tools {
				names[i] = t.Name
			}
			return schemaOffer{}, fmt.Errorf("server %s has no tool %q; it has: %s (see describe)", in.Server, in.Tool, strings.Join(names, ", "))
		}
		return schemaOffer{providers: []discovery.Provider{{Server: s, Tool: s.Tools[i]}}}, nil
	}
	o, err := m.schemaProviders(ctx, in.Schema)
	if err != nil {
		return schemaOffer{}, err
	}
	switch {
	case len(o.providers) == 0 && o.excluded > 0:
		return schemaOffer{}, fmt.Errorf("%d server(s) implement schema %s, none of them trusted: nothing was sent. Ask the user to trust one (cvm market --trust NPUB, or [trust] in config.toml; describe lists them), or call one by its server", o.excluded, o.hash)
	case len(o.providers) == 0:
		return schemaOffer{}, fmt.Errorf("no server announces a verified implementation of schema %s; search for another", o.hash)
	case o.providers[0].Tool.Name != in.Tool:
		return schemaOffer{}, fmt.Errorf("schema %s is the tool %q, not %q", o.hash, o.providers[0].Tool.Name, in.Tool)
	}
	return o, nil
}

// checkArguments refuses arguments that do not fit the tool's announced
// input schema, before anything is sent or paid.
func checkArguments(t discovery.Tool, args map[string]any) error {
	if len(t.InputSchema) == 0 {
		return nil
	}
	var schema any
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
		return nil // the server's to judge
	}
	if args == nil {
		args = map[string]any{}
	}
	if err := commonschema.ValidateArguments(args, schema); err != nil {
		return fmt.Errorf("the arguments do not fit the input schema of %s: %w; nothing was sent (describe shows the schema)", t.Name, err)
	}
	return nil
}

// callServer calls the tool of one server.
func (m *Market) callServer(ctx context.Context, client contextvm.ClientOptions, p discovery.Provider, args map[string]any, progress func(context.Context, *mcp.ProgressNotificationParams)) (*discovery.CallResult, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.AttemptTimeout)
	defer cancel()
	client.Server = p.Server.Pubkey.Hex()
	client.Relays = slices.Concat(p.Server.Relays, client.Relays, m.opts.Pool.Relays())
	client.Pool = nil
	if client.Signer != nil {
		if me, err := client.Signer.GetPublicKey(ctx); err == nil && me == p.Server.Pubkey {
			client.Signer = contextvm.NewKeySigner(nostr.Generate()) // a server cannot call itself
		}
	}
	start := time.Now()
	res := &discovery.CallResult{Provider: p}
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: m.opts.Name, Version: m.opts.Version}, discovery.ProgressClient(progress)), client)
	if err == nil {
		defer cs.Close()
		params := &mcp.CallToolParams{Name: p.Tool.Name, Arguments: args}
		if progress != nil {
			params.SetProgressToken(fmt.Sprintf("market-%d", time.Now().UnixNano()))
		}
		res.Result, err = cs.CallTool(ctx, params)
	}
	res.Attempts = []discovery.Attempt{{Provider: p, Elapsed: time.Since(start), Err: err}}
	if _, declined := contextvm.Declined(err); !declined {
		if err == nil {
			m.opts.History.Succeeded(p.Server.Pubkey, time.Since(start), time.Now())
		} else {
			m.opts.History.Failed(p.Server.Pubkey, time.Now())
		}
	}
	return res, err
}

// callError says what became of a call that has no result, and what to do.
func callError(err error, res *discovery.CallResult) error {
	if d, ok := contextvm.Declined(err); ok {
		return fmt.Errorf("not paid: the call costs %d %s and the market declined to pay it (%s); nothing was paid. Ask the user to raise the budget (cvm market --max-sats, --max-sats-per-day, --max-sats-per-server-per-day) or to approve it: %w", d.Amount, d.Unit, d.Reason, err)
	}
	n := 0
	if res != nil {
		n = len(res.Attempts)
	}
	return fmt.Errorf("the call failed on %d provider(s): %w; try again later, or another server (search)", n, err)
}

// withMeta is the provider's result with what the market adds to it.
func withMeta(res *discovery.CallResult, scores reputation.Scores, paid []Payment) *mcp.CallToolResult {
	p := res.Provider
	meta := CallMeta{Server: p.Server.Npub, ServerName: p.Server.Name, Price: p.Tool.Price, Paid: paid}
	if sc, ok := scores[p.Server.Pubkey]; ok {
		meta.Reputation = &sc
	}
	for _, at := range res.Attempts {
		if at.Err != nil {
			meta.Failed = append(meta.Failed, fmt.Sprintf("%s (%s): %v", at.Provider.Server.Npub, at.Provider.Server.Name, at.Err))
		}
	}
	out := *res.Result
	out.Meta = mcp.Meta{}
	for k, v := range res.Result.Meta {
		out.Meta[k] = v
	}
	out.Meta[MetaKey] = meta
	return &out
}

// passProgress passes a provider's progress notifications on to the host,
// under the host's token; nil when the host asked for none.
func (m *Market) passProgress(req *mcp.CallToolRequest) func(context.Context, *mcp.ProgressNotificationParams) {
	if req == nil || req.Session == nil || req.Params == nil || req.Params.GetProgressToken() == nil {
		return nil
	}
	token, ss := req.Params.GetProgressToken(), req.Session
	return func(ctx context.Context, p *mcp.ProgressNotificationParams) {
		if err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p.Progress, Total: p.Total, Message: p.Message}); err != nil {
			m.log.Debug("could not pass progress on to the host", "err", err)
		}
	}
}
