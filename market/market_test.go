package market_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/market"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type translateIn struct {
	Text string `json:"text"`
	To   string `json:"to"`
}

// fixture is a relay with translate providers, a fake ledger they are
// paid through, and the payer's account in it.
type fixture struct {
	t      *testing.T
	relay  *relay.Server
	pool   *nostrx.Pool
	ledger *payments.Ledger
	served chan string
	// confirm is the market's policy when the host cannot be asked (nil:
	// pay within the budget).
	confirm func(context.Context, contextvm.PaymentOffer) bool
	// protocol is the MCP version the host asks for ("": the latest).
	protocol string
	// mounts are the market's Options.Mounts, kept mounted while the
	// test runs.
	mounts []string
	// cash, when set, is the mint of a bearer rail the providers take in
	// the request itself (into till) and the market pays with (from
	// purse), instead of the ledger's invoices.
	cash        *payments.FakeMint
	till, purse *payments.FakeWallet
}

const payer = "agent"

func newFixture(t *testing.T) *fixture {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	p := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	t.Cleanup(func() { p.Close() })
	ledger := payments.NewLedger(map[string]int64{payer: 100})
	return &fixture{t: t, relay: r, pool: p, ledger: ledger, served: make(chan string, 16)}
}

// provider starts who, a translate provider asking price sats through
// its gate (none for "0").
func (f *fixture) provider(who, price string) *contextvm.Server {
	f.t.Helper()
	return f.providerWithKey(who, price, nostr.Generate())
}

func (f *fixture) providerWithKey(who, price string, key nostr.SecretKey) *contextvm.Server {
	t := f.t
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: who, Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "translate", Description: "Translate text"}, func(ctx context.Context, req *mcp.CallToolRequest, in translateIn) (*mcp.CallToolResult, any, error) {
		f.served <- who
		if token := req.Params.GetProgressToken(); token != nil {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Total: 2, Message: who + " is translating"})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who + ": " + in.Text}}}, nil, nil
	})
	var gate contextvm.Gate
	switch {
	case price != "0" && f.cash != nil:
		gate = cep8.NewGate(cep8.Options{Redeemers: []payments.Redeemer{&payments.FakeRedeemer{Mint: f.cash, Payee: f.till}}})
	case price != "0":
		gate = cep8.NewGate(cep8.Options{Processors: []payments.Processor{&payments.FakeProcessor{Ledger: f.ledger, Payee: who}}})
	}
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(key), Relays: []string{f.relay.URL},
		Info: contextvm.ServerInfo{Name: who}, Announce: true,
		Prices:      []contextvm.Price{{Capability: "tool:translate", Amount: price}},
		CommonTools: []string{"translate"}, ToolCategories: []string{"language"}, Gate: gate,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), s)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// announced waits until want providers have announced translate, and
// returns its schema hash.
func (f *fixture) announced(want int) string {
	t := f.t
	t.Helper()
	var hash string
	testwait.Eventually(t, 20*time.Second, "the providers to announce translate", func() bool {
		ctx, cancel := testwait.Context(t, 5*time.Second)
		defer cancel()
		c, err := discovery.Fetch(ctx, f.pool, discovery.Filter{Category: "language"})
		if err != nil {
			return false
		}
		servers := c.Servers(discovery.Filter{})
		if len(servers) != want {
			return false
		}
		for _, s := range servers {
			if len(s.Tools) != 1 || !s.Tools[0].Verified {
				return false
			}
		}
		hash = servers[0].Tools[0].SchemaHash
		return true
	})
	return hash
}

// host is an MCP client connected to a market over f's relay, trusting
// trusted and paying within perCall sats a call from the payer's account.
func (f *fixture) host(perCall int64, trusted ...nostr.PubKey) *mcp.ClientSession {
	return f.hostWith(nil, perCall, trusted...)
}

// hostWith is host with the host's client options.
func (f *fixture) hostWith(opts *mcp.ClientOptions, perCall int64, trusted ...nostr.PubKey) *mcp.ClientSession {
	t := f.t
	t.Helper()
	trust := map[nostr.PubKey]bool{}
	for _, pk := range trusted {
		trust[pk] = true
	}
	pay := &cep8.PayOptions{Handlers: []payments.Handler{&payments.FakeHandler{Ledger: f.ledger, Payer: payer}},
		Budget: &payments.Budget{PerCall: perCall, Path: filepath.Join(t.TempDir(), "budget.json")}, Confirm: f.confirm}
	if f.purse != nil {
		pay.Handlers, pay.Bearers = nil, []payments.Bearer{f.purse}
	}
	m, err := market.New(market.Options{
		Pool:    f.pool,
		Client:  contextvm.ClientOptions{Signer: contextvm.NewKeySigner(nostr.Generate()), RequestTimeout: 10 * time.Second},
		Pay:     pay,
		Trusted: trust, History: discovery.OpenHistory(filepath.Join(t.TempDir(), "history.json")),
		AttemptTimeout: 10 * time.Second, Mounts: f.mounts,
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(context.Background())
	mounted := make(chan error, 1)
	go func() { mounted <- m.Mount(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-mounted; err != nil {
			t.Errorf("Mount: %v", err)
		}
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	ss, err := m.Server().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host"}, opts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: f.protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// call calls a market tool.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// refused checks that res is a tool error saying want.
func refused(t *testing.T, res *mcp.CallToolResult, want string) {
	t.Helper()
	if !res.IsError || !strings.Contains(text(res), want) {
		t.Fatalf("result %q (isError %v); want a tool error saying %q", text(res), res.IsError, want)
	}
}

func (f *fixture) balance() int64 {
	b, err := f.ledger.Balance(context.Background(), payer)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// nothingPaid checks that the payer paid nothing and no provider ran a
// call.
func (f *fixture) nothingPaid() {
	f.t.Helper()
	if b := f.balance(); b != 100 {
		f.t.Fatalf("balance %d; want 100, nothing paid", b)
	}
	f.noneServed()
}

// noneServed checks that no provider ran a call.
func (f *fixture) noneServed() {
	f.t.Helper()
	select {
	case who := <-f.served:
		f.t.Fatalf("%s ran the call; want none sent", who)
	default:
	}
}

// A call whose every provider asks more than the budget allows is
// refused before anything is sent: nothing is paid.
func TestMarket_OverBudgetPaysNothing(t *testing.T) {
	f := newFixture(t)
	dear := f.provider("Dear", "9")
	hash := f.announced(1)
	cs := f.host(5, dear.PublicKey())

	res := call(t, cs, "call", map[string]any{"schema": hash, "tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}})
	refused(t, res, "over budget")
	f.nothingPaid()
}

// A market that may pay nothing refuses a priced call to a server up
// front, and says why.
func TestMarket_PriceWithoutACapPaysNothing(t *testing.T) {
	f := newFixture(t)
	p := f.provider("Priced", "3")
	f.announced(1)
	cs := f.host(0, p.PublicKey())

	res := call(t, cs, "call", map[string]any{"server": nostrx.EncodeNpub(p.PublicKey()), "tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}})
	refused(t, res, "over budget")
	refused(t, res, "pays nothing (it runs without --max-sats")
	f.nothingPaid()
}

// A server the catalog does not know is refused, with what to do.
func TestMarket_UnknownServer(t *testing.T) {
	f := newFixture(t)
	f.provider("Free", "0")
	f.announced(1)
	cs := f.host(5)

	stranger := nostrx.EncodeNpub(nostr.Generate().Public())
	refused(t, call(t, cs, "call", map[string]any{"server": stranger, "tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}}), "unknown server")
	refused(t, call(t, cs, "describe", map[string]any{"server": "nobody"}), "unknown server")
	f.noneServed()
}

// A schema whose providers are none of them trusted is refused under the
// default policy: nothing is sent to a stranger.
func TestMarket_NoTrustedProvider(t *testing.T) {
	f := newFixture(t)
	f.provider("Stranger", "0")
	hash := f.announced(1)
	cs := f.host(5) // trusts no one

	refused(t, call(t, cs, "call", map[string]any{"schema": hash, "tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}}), "none of them trusted")
	f.noneServed()
}

// Arguments that do not fit the tool's input schema are refused before
// anything is sent or paid.
func TestMarket_BadArgumentsSendNothing(t *testing.T) {
	f := newFixture(t)
	p := f.provider("Priced", "3")
	hash := f.announced(1)
	cs := f.host(5, p.PublicKey())

	refused(t, call(t, cs, "call", map[string]any{"schema": hash, "tool": "translate", "arguments": map[string]any{"text": 5, "to": "fr"}}), "do not fit the input schema")
	refused(t, call(t, cs, "call", map[string]any{"server": nostrx.EncodeNpub(p.PublicKey()), "tool": "translate", "arguments": map[string]any{"text": []any{}}}), "do not fit the input schema")
	f.nothingPaid()
}

// A call by schema goes to the trusted provider, is paid within the
// budget, and the budget tool reports the spend.
func TestMarket_CallPaysAndReportsTheSpend(t *testing.T) {
	f := newFixture(t)
	f.provider("Stranger", "1")
	mine := f.provider("Mine", "3")
	hash := f.announced(2)
	cs := f.host(5, mine.PublicKey())

	found := call(t, cs, "search", map[string]any{"schema": hash[:12]})
	var offers market.SearchOutput
	decode(t, found.StructuredContent, &offers)
	if len(offers.Offers) != 2 || offers.Offers[0].ServerName != "Mine" || !strings.Contains(offers.Offers[0].Why, "trusted") {
		t.Fatalf("search: %+v; want Mine first, trusted, then Stranger", offers)
	}

	res := call(t, cs, "call", map[string]any{"schema": hash, "tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}})
	if res.IsError || text(res) != "Mine: hi" {
		t.Fatalf("call: %q (isError %v); want Mine's answer", text(res), res.IsError)
	}
	var meta market.CallMeta
	decode(t, res.Meta[market.MetaKey], &meta)
	if len(meta.Paid) != 1 || meta.Paid[0].Amount != 3 || meta.ServerName != "Mine" {
		t.Fatalf("meta %+v; want 3 sats paid to Mine", meta)
	}
	if b := f.balance(); b != 97 {
		t.Fatalf("balance %d; want 97", b)
	}

	var spend market.BudgetOutput
	decode(t, call(t, cs, "budget", nil).StructuredContent, &spend)
	if spend.SpentToday != 3 || len(spend.Servers) != 1 || spend.Servers[0].Server != nostrx.EncodeNpub(mine.PublicKey()) || spend.Servers[0].Spent != 3 {
		t.Fatalf("budget %+v; want 3 sats spent, with Mine", spend)
	}
}

// A market whose only rail is a bearer one (Cashu's shape: a payload in the
// request, change back) pays with it: the provider asks for a direct
// payment, the market's payer sends the call again with the payload, and
// the spend is reported like any other.
func TestMarket_PaysInTheRequestWithABearerRail(t *testing.T) {
	f := newFixture(t)
	f.cash = payments.NewFakeMint("mint")
	f.till, f.purse = payments.NewFakeWallet(f.cash), payments.NewFakeWallet(f.cash, 4, 4)
	mine := f.provider("Mine", "3")
	f.announced(1)
	cs := f.host(5, mine.PublicKey())

	res := call(t, cs, "call", map[string]any{"server": nostrx.EncodeNpub(mine.PublicKey()), "tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}})
	if res.IsError || text(res) != "Mine: hi" {
		t.Fatalf("call: %q (isError %v); want Mine's answer", text(res), res.IsError)
	}
	if till, purse := f.till.Balance(), f.purse.Balance(); till != 3 || purse != 5 {
		t.Fatalf("provider holds %d, market %d; want 3 and 5 (8 less the price)", till, purse)
	}
	var spend market.BudgetOutput
	decode(t, call(t, cs, "budget", nil).StructuredContent, &spend)
	if spend.SpentToday != 3 {
		t.Fatalf("budget %+v; want 3 sats spent", spend)
	}
}

func decode(t *testing.T, v any, into any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// The provider's progress notifications reach the host, under the host's
// own progress token, on a call by schema and on a call to a server.
func TestMarket_PassesProgressThrough(t *testing.T) {
	f := newFixture(t)
	p := f.provider("Free", "0")
	hash := f.announced(1)
	progress := make(chan *mcp.ProgressNotificationParams, 16)
	cs := f.hostWith(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		progress <- req.Params
	}}, 5, p.PublicKey())

	for i, target := range []map[string]any{{"schema": hash}, {"server": nostrx.EncodeNpub(p.PublicKey())}} {
		args := map[string]any{"tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}}
		for k, v := range target {
			args[k] = v
		}
		ctx, cancel := testwait.Context(t, 30*time.Second)
		params := &mcp.CallToolParams{Name: "call", Arguments: args}
		token := fmt.Sprintf("host-%d", i)
		params.SetProgressToken(token)
		res, err := cs.CallTool(ctx, params)
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("call %v: %v, %q", target, err, text(res))
		}
		// A notification may be handled after the result it preceded.
		want, deadline := token+" Free is translating", time.After(testwait.Timeout(10*time.Second))
		for got := ""; got != want; {
			select {
			case n := <-progress:
				got = fmt.Sprint(n.ProgressToken, " ", n.Message)
			case <-deadline:
				t.Fatalf("call %v: no progress %q", target, want)
			}
		}
	}
}

// A host that declared elicitation is asked before each payment, and its
// answer wins over the configured policy (here: never pay); a host that
// declines has nothing paid.
func TestMarket_ConfirmsPaymentsThroughElicitation(t *testing.T) {
	f := newFixture(t)
	p := f.provider("Priced", "3")
	hash := f.announced(1)
	f.confirm = func(context.Context, contextvm.PaymentOffer) bool { return false }
	f.protocol = "2025-11-25" // the last on which a server asks while serving a call
	asked := make(chan string, 4)
	answer := "accept"
	elicit := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- req.Params.Message
		return &mcp.ElicitResult{Action: answer}, nil
	}}
	cs := f.hostWith(elicit, 5, p.PublicKey())
	args := map[string]any{"schema": hash, "tool": "translate", "arguments": map[string]any{"text": "hi", "to": "fr"}}

	if res := call(t, cs, "call", args); res.IsError || text(res) != "Priced: hi" {
		t.Fatalf("accepted: %q (isError %v); want Priced's answer", text(res), res.IsError)
	}
	if q := <-asked; !strings.Contains(q, "Pay 3 sats") {
		t.Fatalf("the host was asked %q; want the price", q)
	}
	if b := f.balance(); b != 97 {
		t.Fatalf("balance %d after an accepted payment; want 97", b)
	}

	answer = "decline"
	refused(t, call(t, cs, "call", args), "not paid")
	if b := f.balance(); b != 97 {
		t.Fatalf("balance %d after a declined payment; want 97", b)
	}

	// On the latest protocol a server may not ask while it serves a call:
	// the configured policy decides, without asking.
	f.protocol, answer = "", "accept"
	<-asked
	latest := f.hostWith(elicit, 5, p.PublicKey())
	refused(t, call(t, latest, "call", args), "not paid")
	if len(asked) != 0 {
		t.Fatalf("the host on the latest protocol was asked %q", <-asked)
	}
}

// A mounted server's tools are the market's own, namespaced: a host is
// told when they appear (the server announces itself after the market
// started) and calls them as any tool.
func TestMarket_MountsAServersToolsAndTellsOfChanges(t *testing.T) {
	f := newFixture(t)
	key := nostr.Generate()
	npub := nostrx.EncodeNpub(key.Public())
	f.mounts = []string{npub}
	changed := make(chan struct{}, 16)
	cs := f.hostWith(&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}}, 5, key.Public())
	name := "alpha-" + npub[5:11] + "__translate"
	if tools := toolNames(t, cs); slices.Contains(tools, name) {
		t.Fatalf("tools %v before Alpha announced itself", tools)
	}

	f.providerWithKey("Alpha", "0", key)
	testwait.Eventually(t, 30*time.Second, "the mounted tool to be listed after a list_changed", func() bool {
		select {
		case <-changed:
			return slices.Contains(toolNames(t, cs), name)
		default:
			return false
		}
	})
	res := call(t, cs, name, map[string]any{"text": "hi", "to": "fr"})
	if res.IsError || text(res) != "Alpha: hi" {
		t.Fatalf("mounted call: %q (isError %v); want Alpha's answer", text(res), res.IsError)
	}
	refused(t, call(t, cs, name, map[string]any{"text": 5}), "do not fit the input schema")
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// A mounted common schema is one tool of the market, named by the tool
// and the start of the hash, called on the schema's best provider.
func TestMarket_MountsASchemaOnItsBestProvider(t *testing.T) {
	f := newFixture(t)
	mine := f.provider("Mine", "0")
	f.provider("Stranger", "0")
	hash := f.announced(2)
	f.mounts = []string{hash}
	cs := f.host(5, mine.PublicKey())

	name := "translate__" + hash[:8]
	testwait.Eventually(t, 30*time.Second, "the mounted schema to be listed", func() bool { return slices.Contains(toolNames(t, cs), name) })
	if res := call(t, cs, name, map[string]any{"text": "hi", "to": "fr"}); res.IsError || text(res) != "Mine: hi" {
		t.Fatalf("mounted schema: %q (isError %v); want the trusted provider's answer", text(res), res.IsError)
	}
}

// A mount that is neither a key nor a schema hash is refused up front.
func TestMarket_RefusesABadMount(t *testing.T) {
	_, err := market.New(market.Options{Pool: nostrx.NewPool(nostrx.PoolOptions{}), Mounts: []string{"weather"}})
	if err == nil || !strings.Contains(err.Error(), "neither a server's public key") {
		t.Fatalf("New: %v; want the mount refused", err)
	}
}
