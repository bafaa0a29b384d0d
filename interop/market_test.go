package interop

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/cvmtest"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// marketProvider starts a cvm gateway over server-everything announcing
// get-sum as a common tool at price sats, paid into wallet; it waits for
// the announcement and returns the process and its npub.
func marketProvider(t *testing.T, relayURL, wallet, price string) (*cvmtest.Proc, string) {
	t.Helper()
	p := cvmtest.Start(t, build.CVM(t), cvmtest.Options{Env: cvmEnv(t.TempDir())}, "gateway", "--relay", relayURL,
		"--announce", "--common-tool", "get-sum", "--category", "math", "--price", "tool:get-sum="+price,
		"--wallet-file", walletFile(t, wallet), "--", "node", everything(t))
	var info gatewayInfo
	p.ReadyLine(t, &info)
	p.Stderr.Await(t, 30*time.Second, `msg=announced`)
	return p, info.Npub
}

// marketHost is the official TypeScript MCP client running cvm market on
// stdio (js/market-host.mjs): ask sends it one market tool call.
type marketHost struct {
	t    *testing.T
	proc *cvmtest.Proc
}

type marketAnswer struct {
	Error  string `json:"error"`
	Result struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Meta              map[string]struct {
			Server string `json:"server"`
			Paid   []struct {
				Server string `json:"server"`
				Amount int64  `json:"amount"`
			} `json:"paid"`
			Failed []string `json:"failed"`
		} `json:"_meta"`
	} `json:"result"`
}

func startMarketHost(t *testing.T, args ...string) *marketHost {
	t.Helper()
	requireNodeModules(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	marketArgs, _ := json.Marshal(append([]string{"market", "--log-level", "debug"}, args...))
	p := cvmtest.Start(t, node, cvmtest.Options{Dir: ".", Env: withEnv(map[string]string{
		"CVM_BIN": build.CVM(t), "MARKET_ARGS": string(marketArgs), "CVM_HOME": t.TempDir(), "TIMEOUT_MS": "90000",
	})}, "js/market-host.mjs")
	var ready struct {
		Ready bool     `json:"ready"`
		Tools []string `json:"tools"`
		Error string   `json:"error"`
	}
	p.ReadyLine(t, &ready)
	if !ready.Ready || strings.Join(ready.Tools, ",") != "budget,call,describe,search" {
		t.Fatalf("market host: %+v; stderr: %s", ready, p.Stderr)
	}
	return &marketHost{t: t, proc: p}
}

func (h *marketHost) ask(tool string, args map[string]any) marketAnswer {
	h.t.Helper()
	line, _ := json.Marshal(map[string]any{"tool": tool, "arguments": args})
	if _, err := h.proc.Stdin.Write(append(line, '\n')); err != nil {
		h.t.Fatal(err)
	}
	var a marketAnswer
	if out := h.proc.Line(h.t); json.Unmarshal([]byte(out), &a) != nil || a.Error != "" {
		h.t.Fatalf("%s: %q; stderr: %s", tool, out, h.proc.Stderr)
	}
	return a
}

// The official TypeScript MCP client, as an agent's host, drives cvm market
// on stdio in a loopback catalog of three providers of get-sum (real cvm
// gateways over server-everything, paid over NWC to cvm wallet-sim): it
// finds the tool by its common schema, calls the best-ranked provider
// (trusted and cheapest), pays it within the budget, fails over to the
// next trusted one when that one is killed, and reads the spend back.
func TestMarket_TypeScriptHostFindsPaysFailsOverAndReports(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	sim := startWalletSim(t, r.URL, "best=0", "next=0", "stranger=0", "alice=100")
	best, bestNpub := marketProvider(t, r.URL, sim.Wallets["best"], "3")
	_, nextNpub := marketProvider(t, r.URL, sim.Wallets["next"], "5")
	_, strangerNpub := marketProvider(t, r.URL, sim.Wallets["stranger"], "1") // cheapest, not trusted

	host := startMarketHost(t, "--relay", r.URL, "--trust", bestNpub, "--trust", nextNpub,
		"--wallet-file", walletFile(t, sim.Wallets["alice"]), "--max-sats", "10", "--max-sats-per-day", "20", "--yes", "--timeout", "10s")

	found := host.ask("search", map[string]any{"query": "sum"})
	var offers struct {
		Offers []struct {
			Server string `json:"server"`
			Tool   string `json:"tool"`
			Schema string `json:"schema"`
			Why    string `json:"why"`
		} `json:"offers"`
	}
	if err := json.Unmarshal(found.Result.StructuredContent, &offers); err != nil || len(offers.Offers) != 3 {
		t.Fatalf("search: %+v (%v)", found.Result, err)
	}
	order := []string{bestNpub, nextNpub, strangerNpub}
	for i, o := range offers.Offers {
		if o.Server != order[i] || o.Tool != "get-sum" || o.Schema == "" || o.Schema != offers.Offers[0].Schema {
			t.Fatalf("offer %d: %+v; want %s with the common schema (order best, next, stranger)", i, o, order[i])
		}
	}
	hash := offers.Offers[0].Schema

	sum := map[string]any{"schema": hash, "tool": "get-sum", "arguments": map[string]any{"a": 1, "b": 2}}
	first := host.ask("call", sum)
	meta := first.Result.Meta["cvm/market"]
	if first.Result.IsError || !strings.Contains(first.Result.Content[0].Text, "3") || meta.Server != bestNpub || len(meta.Paid) != 1 || meta.Paid[0].Amount != 3 {
		t.Fatalf("first call: %+v; want best's sum, 3 sats paid", first.Result)
	}

	best.Stop(t, syscall.SIGKILL) // announced, no longer answering
	second := host.ask("call", sum)
	meta = second.Result.Meta["cvm/market"]
	if second.Result.IsError || meta.Server != nextNpub || len(meta.Paid) != 1 || meta.Paid[0].Amount != 5 || len(meta.Failed) != 1 || !strings.Contains(meta.Failed[0], bestNpub) {
		t.Fatalf("after best was killed: %+v; want next's answer, 5 sats paid, best failed", second.Result)
	}

	var spend struct {
		SpentToday int64 `json:"spentToday"`
		LeftToday  int64 `json:"leftToday"`
		Servers    []struct {
			Server string `json:"server"`
			Spent  int64  `json:"spent"`
		} `json:"servers"`
	}
	report := host.ask("budget", nil)
	if err := json.Unmarshal(report.Result.StructuredContent, &spend); err != nil || spend.SpentToday != 8 || spend.LeftToday != 12 ||
		fmt.Sprint(spend.Servers) != fmt.Sprintf("[{%s 5} {%s 3}]", nextNpub, bestNpub) {
		t.Fatalf("budget: %s (%v); want 8 spent, 12 left: 5 with next, 3 with best", report.Result.StructuredContent, err)
	}
	wantBalances(t, sim, map[string]int64{"alice": 92_000, "best": 3_000, "next": 5_000, "stranger": 0})
}
