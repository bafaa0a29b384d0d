package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/usdrate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func (a *app) toolsCommand() *cobra.Command {
	var cf clientFlags
	var rf rateFlags
	cmd := &cobra.Command{
		Use:   "tools SERVER",
		Short: "List the tools of a ContextVM server",
		Long: `List the tools of SERVER: name, price, the common schema a tool claims
(verified when the tool's own schemas hash to it) and description. Prices
are those the server states in cap tags on its tools/list answer; a price
that cannot be read is shown as unknown, never as free. --json prints a
tools/list result, {"tools":[…]}, with every input schema (cvm schema hash
reads it), and beside it "prices" and "claims", by tool name. A price in
usd is shown with what it comes to in sats at the rate of --usd-rate-url
(or [payments.usd-rate] in config.toml), when one is configured.`,
		Example: `  cvm tools npub1…
  cvm tools weather --json`,
		Args: positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rates, err := a.usdRates(rf)
			if err != nil {
				return err
			}
			cs, err := a.dial(ctx, cf, args[0], dialOptions{})
			if err != nil {
				return err
			}
			defer cs.Close()
			tools, err := all(cs.Tools(ctx, nil))
			cs.answered(err)
			if err != nil {
				return remoteFailure(ctx, "tools/list", args[0], cs.relays, err)
			}
			cs.rec.Tools, cs.rec.Announced = tools, announced(cs.ann)
			prices := a.withSats(ctx, rates, cs.toolPrices(tools))
			claims := make(map[string]toolClaim)
			for _, tool := range tools {
				if c, ok := claimOf(tool); ok {
					claims[tool.Name] = c
				}
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Tools  []*mcp.Tool                 `json:"tools"`
					Prices map[string]*discovery.Price `json:"prices"`
					Claims map[string]toolClaim        `json:"claims"`
				}{nonNil(tools), prices, claims})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, tool := range tools {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", tool.Name, prices[tool.Name], claims[tool.Name], firstLine(tool.Description))
			}
			return tw.Flush()
		},
	}
	a.addClientFlags(cmd, &cf, 30*time.Second)
	addModeFlags(cmd, &cf, true)
	addRateFlags(cmd, &rf, false)
	return cmd
}

// withSats shows usd prices with their sats at the rate of rates (none:
// as they are). A rate source that fails is said on stderr, and the
// prices shown in usd only.
func (a *app) withSats(ctx context.Context, rates *usdrate.Source, prices map[string]*discovery.Price) map[string]*discovery.Price {
	if rates == nil {
		return prices
	}
	usd := false
	for _, p := range prices {
		usd = usd || p != nil && p.Unit == payments.UnitUSD
	}
	if !usd {
		return prices
	}
	rate, err := rates.USDPerBTC(ctx)
	if err != nil {
		fmt.Fprintf(a.stderr, "usd prices in usd only: %v\n", err)
		return prices
	}
	for name, p := range prices {
		prices[name] = p.InSats(rate)
	}
	return prices
}

func (a *app) resourcesCommand() *cobra.Command {
	var cf clientFlags
	var read string
	cmd := &cobra.Command{
		Use:   "resources SERVER",
		Short: "List the resources of a ContextVM server, or read one",
		Long: `List the resources and resource templates of SERVER, or with --read URI
print the contents of one: text as it is, binary contents decoded. --json
prints the resources/list and resources/templates/list results, or the
resources/read result.`,
		Example: `  cvm resources npub1…
  cvm resources npub1… --read file:///notes.txt`,
		Args: positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cs, err := a.dial(ctx, cf, args[0], dialOptions{})
			if err != nil {
				return err
			}
			defer cs.Close()
			if read != "" {
				res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: read})
				cs.answered(err)
				if err != nil {
					return remoteFailure(ctx, "resources/read "+read, args[0], cs.relays, err)
				}
				if a.jsonOut {
					return a.printJSON(res)
				}
				for _, c := range res.Contents {
					if c.Blob != nil {
						a.stdout.Write(c.Blob)
						continue
					}
					fmt.Fprint(a.stdout, c.Text)
					if !strings.HasSuffix(c.Text, "\n") {
						fmt.Fprintln(a.stdout)
					}
				}
				return nil
			}
			resources, err := all(cs.Resources(ctx, nil))
			cs.answered(err)
			if err != nil {
				return remoteFailure(ctx, "resources/list", args[0], cs.relays, err)
			}
			templates, err := all(cs.ResourceTemplates(ctx, nil))
			if err != nil {
				return remoteFailure(ctx, "resources/templates/list", args[0], cs.relays, err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Resources         []*mcp.Resource         `json:"resources"`
					ResourceTemplates []*mcp.ResourceTemplate `json:"resourceTemplates"`
				}{nonNil(resources), nonNil(templates)})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, r := range resources {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", r.URI, r.MIMEType, firstLine(orElse(r.Description, r.Name)))
			}
			for _, r := range templates {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", r.URITemplate, r.MIMEType, firstLine(orElse(r.Description, r.Name)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&read, "read", "", "read the resource at this URI")
	a.addClientFlags(cmd, &cf, 30*time.Second)
	addModeFlags(cmd, &cf, true)
	return cmd
}

func (a *app) promptsCommand() *cobra.Command {
	var cf clientFlags
	var get string
	cmd := &cobra.Command{
		Use:   "prompts SERVER [--get NAME [key=value…]]",
		Short: "List the prompts of a ContextVM server, or get one",
		Long: `List the prompts of SERVER with their arguments (* marks required ones), or
with --get NAME print the messages of one, its arguments given as key=value.
--json prints the prompts/list or prompts/get result.`,
		Example: `  cvm prompts npub1…
  cvm prompts npub1… --get greet name=Ada`,
		Args: positional(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if get == "" && len(args) > 1 {
				return fmt.Errorf("prompt arguments (%s) need --get NAME", strings.Join(args[1:], " "))
			}
			promptArgs := map[string]string{}
			for _, kv := range args[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("prompt argument %q: want key=value", kv)
				}
				promptArgs[k] = v
			}
			ctx := cmd.Context()
			cs, err := a.dial(ctx, cf, args[0], dialOptions{})
			if err != nil {
				return err
			}
			defer cs.Close()
			if get != "" {
				res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: get, Arguments: promptArgs})
				cs.answered(err)
				if err != nil {
					return remoteFailure(ctx, "prompts/get "+get, args[0], cs.relays, err)
				}
				if a.jsonOut {
					return a.printJSON(res)
				}
				for _, m := range res.Messages {
					fmt.Fprintf(a.stdout, "%s: %s\n", m.Role, describeContent(m.Content))
				}
				return nil
			}
			prompts, err := all(cs.Prompts(ctx, nil))
			cs.answered(err)
			if err != nil {
				return remoteFailure(ctx, "prompts/list", args[0], cs.relays, err)
			}
			if a.jsonOut {
				return a.printJSON(mcp.ListPromptsResult{Prompts: nonNil(prompts)})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, p := range prompts {
				var names []string
				for _, arg := range p.Arguments {
					if arg.Required {
						names = append(names, arg.Name+"*")
					} else {
						names = append(names, arg.Name)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, strings.Join(names, " "), firstLine(p.Description))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&get, "get", "", "get the prompt with this name")
	a.addClientFlags(cmd, &cf, 30*time.Second)
	addModeFlags(cmd, &cf, true)
	return cmd
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func orElse(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// all collects every page of a list.
func all[T any](pages iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for item, err := range pages {
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// nonNil makes an empty list print as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// toolPrices are the tool prices of a server's list answers, by tool name;
// a tool without one is free.
func toolPrices(prices []contextvm.Price) map[string]*discovery.Price {
	out := make(map[string]*discovery.Price)
	for _, p := range prices {
		if p.Kind() != "tool" {
			continue
		}
		out[p.Name()] = discovery.PriceOf(p)
	}
	return out
}

// toolClaim is the common schema a tool claims in its _meta, and whether
// the claim holds.
type toolClaim struct {
	SchemaHash string `json:"schemaHash"`
	Verified   bool   `json:"verified"`
	Error      string `json:"error,omitempty"`
}

func (c toolClaim) String() string {
	switch {
	case c.SchemaHash == "":
		return ""
	case c.Verified:
		return "schema " + shorten(c.SchemaHash, 12) + " verified"
	}
	return "schema " + shorten(c.SchemaHash, 12) + " NOT VERIFIED: " + firstLine(c.Error)
}

// claimOf checks the common schema tool claims, if any.
func claimOf(tool *mcp.Tool) (toolClaim, bool) {
	raw, err := json.Marshal(tool)
	if err != nil {
		return toolClaim{}, false
	}
	hash, ok := commonschema.Claimed(raw)
	if !ok {
		return toolClaim{}, false
	}
	c := toolClaim{SchemaHash: hash}
	if _, err := commonschema.VerifyClaim(raw); err != nil {
		c.Error = err.Error()
	} else {
		c.Verified = true
	}
	return c, true
}
