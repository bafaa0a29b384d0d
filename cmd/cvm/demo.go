package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// demoStep is one step of `cvm demo`, as --json prints it.
type demoStep struct {
	Step   string  `json:"step"`
	Detail string  `json:"detail"`
	Ms     float64 `json:"ms"`
}

func (a *app) demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run an MCP server on Nostr and call it, all on this machine",
		Long: `Start the embedded relay on a free loopback port, put the demo MCP server
(examples/demoserver) on it through a gateway with encryption required, then
connect to it by public key as any client would, list its tools and call
one. Each step is printed with how long it took; then everything shuts down.
Nothing leaves this machine and nothing is written to disk.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			var steps []demoStep
			step := func(name, detail string, start time.Time) {
				s := demoStep{name, detail, float64(time.Since(start).Microseconds()) / 1000}
				steps = append(steps, s)
				if !a.jsonOut {
					fmt.Fprintf(a.stdout, "  %d. %-9s %-62s %8.1f ms\n", len(steps), s.Step, s.Detail, s.Ms)
				}
			}
			if !a.jsonOut {
				fmt.Fprintln(a.stdout, "cvm demo: an MCP server on Nostr, reached by its public key, on this machine")
				fmt.Fprintln(a.stdout)
			}
			if err := runDemo(ctx, step); err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(struct {
					OK    bool       `json:"ok"`
					Steps []demoStep `json:"steps"`
				}{true, steps})
			}
			fmt.Fprintln(a.stdout)
			fmt.Fprintln(a.stdout, "Next: put your own server on a relay with `cvm gateway -- COMMAND`, then `cvm call NPUB TOOL key=value`.")
			return nil
		},
	}
}

// runDemo performs the demo, reporting each step.
func runDemo(ctx context.Context, step func(name, detail string, start time.Time)) (err error) {
	t := time.Now()
	r, err := relay.Start("127.0.0.1:0", relay.Options{})
	if err != nil {
		return fmt.Errorf("start the relay: %w", err)
	}
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	step("relay", "embedded relay on "+r.URL, t)

	t = time.Now()
	// The demo server in the process: one server session per client
	// session, as a child process would be.
	gw, err := gateway.New(ctx, gateway.Options{
		Upstream: gateway.InProcess(demoserver.New()),
		Server: contextvm.ServerOptions{
			Signer:     contextvm.NewKeySigner(nostr.Generate()),
			Relays:     []string{r.URL},
			Encryption: contextvm.EncryptRequired,
			Info:       contextvm.ServerInfo{Name: "cvm demo", About: "the demo server of cvm, behind a gateway"},
		},
	})
	if err != nil {
		return fmt.Errorf("start the gateway: %w", err)
	}
	defer gw.Close()
	srv := gw.Server()
	served := make(chan struct{})
	go func() {
		defer close(served)
		gw.Serve(ctx)
	}()
	npub := nostrx.EncodeNpub(srv.PublicKey())
	step("gateway", fmt.Sprintf("demo server at %s…, encryption required", npub[:20]), t)

	t = time.Now()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "cvm-demo-client", Version: "1"}, nil), contextvm.ClientOptions{
		Server:     npub,
		Relays:     []string{r.URL},
		Encryption: contextvm.EncryptRequired,
	})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	init := cs.InitializeResult()
	step("connect", fmt.Sprintf("initialize: %s %s, MCP %s, gift-wrapped", init.ServerInfo.Name, init.ServerInfo.Version, init.ProtocolVersion), t)

	t = time.Now()
	tools, err := all(cs.Tools(ctx, nil))
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	step("tools", toolNames(tools), t)

	t = time.Now()
	args := map[string]any{"a": 2, "b": 3}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: args})
	if err != nil {
		return fmt.Errorf("tools/call add: %w", err)
	}
	if res.IsError {
		return fmt.Errorf("tools/call add: %s", contentText(res.Content))
	}
	in, _ := json.Marshal(args)
	step("call", fmt.Sprintf("add %s → %s", in, strings.TrimSpace(contentText(res.Content))), t)

	t = time.Now()
	cs.Close()
	gw.Close()
	<-served
	err = r.Close()
	r = nil
	if err != nil {
		return fmt.Errorf("stop the relay: %w", err)
	}
	step("shutdown", "client, gateway and relay stopped", t)
	return nil
}
