package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callSchema is cvm call --schema: the tool of a common schema, given by
// its hash or the start of it (whole says which), on the best provider,
// failing over to the next.
func (c *callCmd) callSchema(ctx context.Context, tf trustFlags, rf reputationFlags, prefix string, whole bool, name string, args callArguments) error {
	enc, err := contextvm.ParseEncryptionMode(c.cf.encryption)
	if err != nil {
		return fmt.Errorf("--encryption: %w", err)
	}
	policy, trusted, err := c.trust(tf)
	if err != nil {
		return err
	}
	id, err := c.resolveIdentity(c.cf.key, clientKey)
	if err != nil {
		return err
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: c.cf.relays})
	defer pool.Close()

	wait := relayWaitFor(c.cf.timeout)
	stop := c.spinner("looking for servers implementing " + shorten(prefix, 12))
	qctx, cancel := context.WithTimeout(ctx, wait)
	catalog, hash, err := fetchForSchema(qctx, pool, discovery.Filter{}, prefix, whole)
	cancel()
	stop()
	if perr := (*schemaPrefixError)(nil); errors.As(err, &perr) {
		if perr.ambiguous() {
			return perr
		}
		return remote(perr)
	}
	if err != nil {
		return noRelay(c.cf.relays, wait, err)
	}
	history := c.history()
	ranking := discovery.Ranking{Policy: policy, Trusted: trusted, History: history}
	scores, err := c.providerReputation(ctx, pool, rf, policy, catalog.Servers(discovery.Filter{SchemaHash: hash}), history)
	if err != nil {
		return err
	}
	if scores != nil {
		ranking.Reputation = scores
	}
	providers, excluded := catalog.Providers(hash, ranking)
	if len(providers) == 0 {
		return noProviders(policy, excluded, hash, len(pool.Relays()))
	}
	if units := discovery.Units(providers); units != nil {
		fmt.Fprintf(c.stderr, "note: the servers price this tool in different units (%s); prices in different units are not compared\n", strings.Join(units, ", "))
	}
	arguments, err := schemaArguments(providers[0].Tool, hash, name, args)
	if err != nil {
		return err
	}

	res, err := discovery.Call(ctx, discovery.CallOptions{
		SchemaHash: hash, Tool: name, Arguments: arguments,
		Catalog: catalog, Pool: pool, History: history, Policy: policy, Trusted: trusted, Reputation: ranking.Reputation,
		Client: contextvm.ClientOptions{
			Signer: contextvm.NewKeySigner(id.secret), Encryption: enc, RequestTimeout: c.cf.timeout, Logger: c.log, Payer: c.cf.pay.Payer(),
		},
		AttemptTimeout: c.cf.timeout,
		Logger:         c.log,
	})
	c.reportAttempts(history, res)
	if derr, ok := declinedError(err, c.cf.pay); ok {
		return withExit(exitPayment, derr)
	}
	if errors.Is(err, discovery.ErrNoProvider) {
		return remote(err)
	}
	if err != nil {
		return remoteFailure(ctx, "tools/call "+name, "the providers of "+shorten(hash, 12), c.cf.relays, err)
	}
	return c.printSchemaResult(res, scores, name)
}

// noProviders says why no provider of schema hash may be called: none
// announces it, or the excluded ones are not trusted (nor, by policy,
// well enough reputed).
func noProviders(policy discovery.TrustPolicy, excluded int, hash string, relays int) error {
	switch {
	case excluded > 0 && policy == discovery.ByReputation:
		return remote(fmt.Errorf("%d server(s) announce schema %s, none trusted and none with a reputation of %.0f or more: trust one with --trust NPUB (see: cvm discover --schema %s --sort reputation)", excluded, shorten(hash, 16), reputation.AdmitThreshold, hash))
	case excluded > 0:
		return remote(fmt.Errorf("%d server(s) announce schema %s, none of them trusted: trust one with --trust NPUB (see: cvm discover --schema %s --sort reputation), or call those with a good reputation with --trust-policy reputation", excluded, shorten(hash, 16), hash))
	}
	return remote(fmt.Errorf("no server announces a verified implementation of schema %s on %d relay(s) (see: cvm discover --schema %s)", hash, relays, hash))
}

// printSchemaResult tells who answered a call by schema, and why it was
// chosen, then prints the result of tool name.
func (c *callCmd) printSchemaResult(res *discovery.CallResult, scores reputation.Scores, name string) error {
	p := res.Provider
	fmt.Fprintf(c.stderr, "answered by %s (%s), %s\n", p.Server.Name, p.Server.Npub, p.Tool.Price)
	if sc, ok := scores[p.Server.Pubkey]; ok {
		fmt.Fprintf(c.stderr, "reputation %.1f: %s\n", sc.Value, sc.Why)
	}
	if c.out.scripted() {
		return c.printScripted(res.Result, name)
	}
	if c.jsonOut {
		if err := c.printSchemaCall(res, scores); err != nil {
			return err
		}
	}
	if res.Result.IsError {
		return toolError(name, res.Result)
	}
	if !c.jsonOut {
		printContent(c.stdout, res.Result)
	}
	return nil
}

// providerReputation scores the providers of a schema when it can change
// the choice: there is more than one, or the policy admits by reputation.
// Nil otherwise.
func (c *callCmd) providerReputation(ctx context.Context, pool *nostrx.Pool, rf reputationFlags, policy discovery.TrustPolicy, candidates []discovery.Server, history *discovery.History) (reputation.Scores, error) {
	if len(candidates) < 2 && policy != discovery.ByReputation {
		return nil, nil
	}
	wait := relayWaitFor(c.cf.timeout)
	stop := c.spinner("reading reviews from your web of trust")
	defer stop()
	qctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return c.reputationOf(qctx, pool, rf, c.cf.key, history, candidates)
}

// schemaArguments types the command line's arguments by the input schema
// the best provider announced for the tool, and checks them against it.
func schemaArguments(tool discovery.Tool, hash, name string, args callArguments) (map[string]any, error) {
	if tool.Name != name {
		return nil, fmt.Errorf("schema %s is the tool %q, not %q", shorten(hash, 16), tool.Name, name)
	}
	var inputSchema any
	if err := json.Unmarshal(tool.InputSchema, &inputSchema); err != nil {
		return nil, remote(fmt.Errorf("the announced input schema of %s: %w", name, err))
	}
	arguments, err := args.typed(inputSchema)
	if err != nil {
		return nil, fmt.Errorf("%w (see: cvm discover --schema %s --json)", err, hash)
	}
	if err := commonschema.ValidateArguments(arguments, inputSchema); err != nil {
		return nil, fmt.Errorf("arguments for %s do not fit its input schema: %w", name, err)
	}
	return arguments, nil
}

// printSchemaCall prints, with --json, the result of a call by schema with
// the provider that answered and every attempt.
func (c *callCmd) printSchemaCall(res *discovery.CallResult, scores reputation.Scores) error {
	p := res.Provider
	type attempt struct {
		Npub      string `json:"npub"`
		Name      string `json:"name"`
		ElapsedMs int64  `json:"elapsedMs"`
		Error     string `json:"error,omitempty"`
	}
	out := struct {
		Result   *mcp.CallToolResult `json:"result"`
		Provider struct {
			Pubkey string           `json:"pubkey"`
			Npub   string           `json:"npub"`
			Name   string           `json:"name"`
			Price  *discovery.Price `json:"price"`
			// Reputation is there when providers were ranked by it.
			Reputation *reputation.Score `json:"reputation,omitempty"`
		} `json:"provider"`
		Attempts []attempt `json:"attempts"`
	}{Result: res.Result}
	out.Provider.Pubkey, out.Provider.Npub, out.Provider.Name, out.Provider.Price = p.Server.Pubkey.Hex(), p.Server.Npub, p.Server.Name, p.Tool.Price
	if sc, ok := scores[p.Server.Pubkey]; ok {
		out.Provider.Reputation = &sc
	}
	for _, at := range res.Attempts {
		e := attempt{Npub: at.Provider.Server.Npub, Name: at.Provider.Server.Name, ElapsedMs: at.Elapsed.Milliseconds()}
		if at.Err != nil {
			e.Error = at.Err.Error()
		}
		out.Attempts = append(out.Attempts, e)
	}
	return c.printJSON(out)
}

// reportAttempts saves what the providers did and tells of those that
// failed.
func (c *callCmd) reportAttempts(history *discovery.History, res *discovery.CallResult) {
	if serr := history.Save(); serr != nil {
		c.log.Warn("could not save the provider history", "path", history.Path(), "err", serr)
	}
	var attempts []discovery.Attempt
	if res != nil {
		attempts = res.Attempts
	}
	for _, at := range attempts {
		who := fmt.Sprintf("%s (%s)", at.Provider.Server.Name, shorten(at.Provider.Server.Npub, 20))
		if d, ok := contextvm.Declined(at.Err); ok {
			// Not its failure: what to do about it is the command's error.
			fmt.Fprintf(c.stderr, "%s asked %d %s: not paid\n", who, d.Amount, d.Unit)
		} else if at.Err != nil {
			fmt.Fprintf(c.stderr, "%s failed after %s: %s\n", who, at.Elapsed.Round(time.Millisecond), oneLine(at.Err.Error()))
		}
	}
}
