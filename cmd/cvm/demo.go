package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/examples/demoserver"
	"github.com/cvmgo/cvm/gateway"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
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
one. Then a priced tool: the server charges for word_count in sats on a
simulated Lightning network (package lnsim, in memory: no real money), the
client pays the invoice within its budget, and a second call is refused
because it would pass the client's daily budget. Each step is printed with
how long it took; then everything shuts down. Nothing leaves this machine
and nothing is written to disk.`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			var steps []demoStep
			step := func(name, detail string, start time.Time) {
				s := demoStep{name, detail, float64(time.Since(start).Microseconds()) / 1000}
				steps = append(steps, s)
				if !a.jsonOut {
					// The latency before the detail: a column after text of
					// any length cannot stay in line.
					fmt.Fprintf(a.stdout, "  %2d. %-9s %8.1f ms  %s\n", len(steps), s.Step, s.Ms, s.Detail)
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
			fmt.Fprintln(a.stdout, "To charge for a tool: `cvm gateway --price tool:NAME=SATS --wallet-file FILE`; to pay: `cvm call … --max-sats N`.")
			return nil
		},
	}
}

// The demo's priced tool, what it costs, and the client's budget: room
// for one paid call a day, not two.
const (
	demoPricedTool  = "word_count"
	demoPrice       = 21 // sats
	demoClientFunds = 100
	demoDailyBudget = 30
)

// runDemo performs the demo, reporting each step.
func runDemo(ctx context.Context, step func(name, detail string, start time.Time)) (err error) {
	t := time.Now()
	ln, serverWallet, clientWallet, err := demoNetwork()
	if err != nil {
		return err
	}
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
	// Lookups every few ms: the simulator settles at once, and the demo
	// should not wait for a real wallet's pace.
	proc := lightning.NewProcessor(serverWallet, lightning.ProcessorOptions{PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
	defer proc.Close()
	gw, err := demoGateway(ctx, r.URL, proc)
	if err != nil {
		return err
	}
	defer gw.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		gw.Serve(ctx)
	}()
	npub := nostrx.EncodeNpub(gw.Server().PublicKey())
	step("gateway", fmt.Sprintf("demo server at %s…, encryption required", npub[:20]), t)

	t = time.Now()
	// The client pays from its wallet, at most the price per call and
	// demoDailyBudget a day (kept in memory: no Path).
	var (
		offered  = make(chan contextvm.PaymentOffer, 2)
		reported = make(chan contextvm.PaymentReport, 4)
	)
	transport, cs, err := demoClient(ctx, npub, r.URL, clientWallet, offered, reported)
	if err != nil {
		return err
	}
	defer cs.Close()
	init := cs.InitializeResult()
	step("connect", fmt.Sprintf("initialize: %s %s, MCP %s, gift-wrapped", init.ServerInfo.Name, init.ServerInfo.Version, init.ProtocolVersion), t)

	if err := demoFreeCall(ctx, cs, step); err != nil {
		return err
	}
	t = time.Now()
	listed := "unknown"
	for _, p := range transport.Prices() {
		if p.Capability == "tool:"+demoPricedTool {
			listed = p.Amount + " " + cmp.Or(p.Unit, contextvm.DefaultPriceUnit)
		}
	}
	step("price", fmt.Sprintf("%s costs %s (its cap tag); client budget %d sats a day", demoPricedTool, listed, demoDailyBudget), t)
	if err := demoPaidCalls(ctx, cs, ln, offered, reported, step); err != nil {
		return err
	}

	t = time.Now()
	// The gateway first: the refused call's payment request is still
	// waiting there, and its "shutting down" answer reaches a client that
	// still listens at once (a client already gone would leave the
	// gateway waiting for the relay to say nobody heard it).
	gw.Close()
	<-served
	cs.Close()
	err = r.Close()
	r = nil
	if err != nil {
		return fmt.Errorf("stop the relay: %w", err)
	}
	step("shutdown", "client, gateway and relay stopped", t)
	return nil
}

// demoNetwork is a simulated Lightning network in memory (no Dir: nothing
// on disk), with the server's wallet and the client's.
func demoNetwork() (*lnsim.Network, payments.Wallet, payments.Wallet, error) {
	ln, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	for name, sats := range map[string]int64{"server": 0, "client": demoClientFunds} {
		if _, err := ln.AddWallet(name, sats*1000); err != nil {
			return nil, nil, nil, err
		}
	}
	serverWallet, err := ln.Wallet("server")
	if err != nil {
		return nil, nil, nil, err
	}
	clientWallet, err := ln.Wallet("client")
	if err != nil {
		return nil, nil, nil, err
	}
	return ln, serverWallet, clientWallet, nil
}

// demoGateway is the demo server in the process behind a gateway: one
// server session per client session, as a child process would be; its
// priced tool collected with the server's wallet.
func demoGateway(ctx context.Context, relayURL string, proc payments.Processor) (*gateway.Gateway, error) {
	price, err := contextvm.ParsePrice(fmt.Sprintf("tool:%s=%d", demoPricedTool, demoPrice))
	if err != nil {
		return nil, err
	}
	gw, err := gateway.New(ctx, gateway.Options{
		Upstream: gateway.InProcess(demoserver.New()),
		Server: contextvm.ServerOptions{
			Signer:     contextvm.NewKeySigner(nostr.Generate()),
			Relays:     []string{relayURL},
			Encryption: contextvm.EncryptRequired,
			Info:       contextvm.ServerInfo{Name: "cvm demo", About: "the demo server of cvm, behind a gateway"},
			Prices:     []contextvm.Price{price},
			Gate:       cep8.NewGate(cep8.Options{Processors: []payments.Processor{proc}}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start the gateway: %w", err)
	}
	return gw, nil
}

// demoClient connects a paying client: it pays from clientWallet, at
// most the price per call and demoDailyBudget a day (kept in memory: no
// Path), and shows what it was offered and what it paid on the channels.
func demoClient(ctx context.Context, npub, relayURL string, clientWallet payments.Wallet, offered chan<- contextvm.PaymentOffer, reported chan<- contextvm.PaymentReport) (*contextvm.ClientTransport, *mcp.ClientSession, error) {
	transport, err := contextvm.NewClientTransport(contextvm.ClientOptions{
		Server:     npub,
		Relays:     []string{relayURL},
		Encryption: contextvm.EncryptRequired,
		Payer: (&cep8.PayOptions{
			Handlers: []payments.Handler{lightning.NewHandler(clientWallet)},
			Budget:   &payments.Budget{Unit: "sats", PerCall: demoPrice, PerDay: demoDailyBudget},
			// Never blocking the client: the demo reads what it shows, and
			// anything beyond is dropped.
			Confirm: func(_ context.Context, o contextvm.PaymentOffer) bool {
				select {
				case offered <- o:
				default:
				}
				return true
			},
			Report: func(p contextvm.PaymentReport) {
				select {
				case reported <- p:
				default:
				}
			},
		}).Payer(),
	})
	if err != nil {
		return nil, nil, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cvm-demo-client", Version: "1"}, nil).Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: contextvm.ProtocolVersion})
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	return transport, cs, nil
}

// demoFreeCall lists the tools and calls the free one.
func demoFreeCall(ctx context.Context, cs *mcp.ClientSession, step func(name, detail string, start time.Time)) error {
	t := time.Now()
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
	return nil
}

// demoPaidCalls calls the priced tool twice: the first call is paid within
// the budget, the second refused before paying because it would pass the
// daily budget.
func demoPaidCalls(ctx context.Context, cs *mcp.ClientSession, ln *lnsim.Network, offered <-chan contextvm.PaymentOffer,
	reported <-chan contextvm.PaymentReport, step func(name, detail string, start time.Time)) error {
	args := map[string]any{"text": "pay per call over Nostr"}
	t := time.Now()
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: demoPricedTool, Arguments: args})
		done <- result{res, err}
	}()
	var offer contextvm.PaymentOffer
	select {
	case offer = <-offered:
	case r := <-done:
		return fmt.Errorf("tools/call %s ended without asking for payment: %v", demoPricedTool, r.err)
	case <-ctx.Done():
		return ctx.Err()
	}
	inv := offer.PayReq
	if len(inv) > 28 {
		inv = inv[:28] + "…"
	}
	step("invoice", fmt.Sprintf("payment_required: %d %s, %s", offer.Amount, offer.Unit, inv), t)

	t = time.Now()
	r := <-done
	if r.err != nil {
		return fmt.Errorf("tools/call %s: %w", demoPricedTool, r.err)
	}
	if r.res.IsError {
		return fmt.Errorf("tools/call %s: %s", demoPricedTool, contentText(r.res.Content))
	}
	accepted := "not confirmed"
	for range 2 {
		select {
		case p := <-reported:
			if p.Accepted {
				accepted = "payment_accepted"
			}
		case <-time.After(time.Second):
		}
		if accepted == "payment_accepted" {
			break
		}
	}
	step("pay", fmt.Sprintf("paid, %s; %s → %s", accepted, demoPricedTool, strings.TrimSpace(contentText(r.res.Content))), t)

	t = time.Now()
	client, err := ln.Balance("client")
	if err != nil {
		return err
	}
	server, err := ln.Balance("server")
	if err != nil {
		return err
	}
	step("balances", fmt.Sprintf("client %d → %d sats, server 0 → %d sats (simulated wallets)", demoClientFunds, client/1000, server/1000), t)

	t = time.Now()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: demoPricedTool, Arguments: args})
	d, ok := contextvm.Declined(err)
	if !ok {
		return fmt.Errorf("the second paid call should have been refused by the budget, got %v", err)
	}
	step("refused", fmt.Sprintf("%s again: over the %d-sat daily budget (-32017 %s), unpaid", demoPricedTool, demoDailyBudget, d.Reason), t)
	return nil
}
