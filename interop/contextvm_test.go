package interop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk server the TS client talks to: the same tools as ts-server.mjs.
func goServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "cvm-go-server", Version: "1.0.0"}, nil)
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	type sum struct {
		Sum float64 `json:"sum"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers"}, func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, sum, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, sum{in.A + in.B}, nil
	})
	type slowIn struct {
		Steps   int `json:"steps,omitempty"`
		DelayMs int `json:"delayMs,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Report progress, then finish"}, func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
		steps := max(in.Steps, 1)
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= steps; i++ {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(steps)})
				// Pacing is the behaviour under test: progress spread over
				// time, as a tool at work sends it.
				time.Sleep(time.Duration(in.DelayMs) * time.Millisecond)
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "length", Description: "The length of the text"}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		// In UTF-16 code units, as JavaScript counts.
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(utf16.Encode([]rune(in.Text))))}}}, nil, nil
	})
	type sizeIn struct {
		Size int `json:"size"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "blob", Description: "Return size bytes of text"}, func(ctx context.Context, req *mcp.CallToolRequest, in sizeIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Size)}}}, nil, nil
	})
	return s
}

func serveGo(t *testing.T, relays []string, enc contextvm.EncryptionMode, wrap contextvm.GiftWrapMode) *contextvm.Server {
	t.Helper()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer:     contextvm.NewKeySigner(nostr.Generate()),
		Relays:     relays,
		Encryption: enc,
		GiftWrap:   wrap,
		Info:       contextvm.ServerInfo{Name: "cvm interop", About: "Go server", Website: "http://127.0.0.1/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), goServer())
	t.Cleanup(func() { srv.Close() })
	return srv
}

type tsClientResult struct {
	OK              bool           `json:"ok"`
	Error           string         `json:"error"`
	ProtocolVersion string         `json:"protocolVersion"`
	InitTags        [][]string     `json:"initTags"`
	Tools           []string       `json:"tools"`
	Echo            string         `json:"echo"`
	Add             map[string]any `json:"add"`
	Slow            string         `json:"slow"`
	Progress        []float64      `json:"progress"`
	ProgressProbe   progressProbe  `json:"progressProbe"`
	ServerInfo      struct {
		Name string `json:"name"`
	} `json:"serverInfo"`
}

// tsClientSlowDelay is the delay ts-client.mjs asks the slow tool for
// after each progress step, the last one included: the spacing between the
// last progress and the response.
const tsClientSlowDelay = 50 * time.Millisecond

func runTSClient(t *testing.T, relayURL, server string, enc, wrap string, extra map[string]string) tsClientResult {
	t.Helper()
	env := map[string]string{"RELAY_URL": relayURL, "SERVER_PUBKEY": server, "ENCRYPTION": enc, "GIFT_WRAP": wrap,
		"TIMEOUT_MS": fmt.Sprint(testwait.Timeout(4 * time.Second).Milliseconds()), "SLOW_DELAY_MS": fmt.Sprint(tsClientSlowDelay.Milliseconds())}
	for k, v := range extra {
		env[k] = v
	}
	var res tsClientResult
	runScript(t, "ts-client.mjs", env, &res)
	return res
}

func startTSServer(t *testing.T, relayURL, enc, wrap string, extra map[string]string) string {
	t.Helper()
	env := map[string]string{"RELAY_URL": relayURL, "ENCRYPTION": enc, "GIFT_WRAP": wrap, "READY_DELAY_MS": "500"}
	for k, v := range extra {
		env[k] = v
	}
	var ready struct{ Pubkey string }
	startNode(t, "js/ts-server.mjs", env, &ready)
	waitListening(t, relayURL, ready.Pubkey)
	return ready.Pubkey
}

// waitListening returns once the relay has a live subscription for pubkey.
// The reference server reports ready before its subscription reaches the
// relay, and a request sent in between is unheard.
func waitListening(t *testing.T, relayURL, pubkey string) {
	t.Helper()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{relayURL}})
	defer pool.Close()
	probe := nostr.Generate()
	var err error
	if !testwait.Until(t.Context(), 15*time.Second, func() bool {
		evt := nostr.Event{Kind: contextvm.KindMessage, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", pubkey}}, Content: "{}"}
		evt.Sign(probe)
		ctx, cancel := testwait.Context(t, 5*time.Second)
		defer cancel()
		err = pool.Publish(ctx, evt)
		return err == nil
	}) {
		t.Fatalf("server %s never subscribed on %s: %v", pubkey, relayURL, err)
	}
}

var modes = []string{"disabled", "optional", "required"}

// tsClientExpectation: the reference semantics, plus cvm's improvement that a
// server refusing a message's encryption says so instead of staying silent.
func tsClientExpectation(server, client string) (ok bool, errContains string) {
	switch {
	case server == "optional", server == client:
		return true, ""
	case server == "disabled":
		return false, "encryption disabled" // every non-disabled TS client encrypts
	case server == "required" && client == "disabled":
		return false, "requires encryption"
	}
	return true, "" // required server, optional client: the TS client encrypts
}

// TestTSClient_GoServer: the reference TS client against a cvm server, for
// every pair of encryption modes and both gift-wrap preferences.
func TestTSClient_GoServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	for _, sMode := range modes {
		for _, cMode := range modes {
			for _, wrap := range []string{"optional", "persistent"} {
				name := fmt.Sprintf("server=%s/client=%s/wrap=%s", sMode, cMode, wrap)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					enc, _ := contextvm.ParseEncryptionMode(sMode)
					gw, _ := contextvm.ParseGiftWrapMode(wrap)
					srv := serveGo(t, []string{r.URL}, enc, gw)
					res := runTSClient(t, r.URL, srv.PublicKey().Hex(), cMode, wrap, nil)
					wantOK, wantErr := tsClientExpectation(sMode, cMode)
					if !wantOK {
						if res.OK || !strings.Contains(res.Error, wantErr) {
							t.Fatalf("ok=%v error=%q; want a failure saying %q", res.OK, res.Error, wantErr)
						}
						return
					}
					checkTSClientResult(t, res, "cvm-go-server")
					// The first response of the session carries the server's discovery tags.
					if !hasTag(res.InitTags, "name", "cvm interop") {
						t.Errorf("initialize response tags %v lack the server name", res.InitTags)
					}
					if sMode != "disabled" && !hasTag(res.InitTags, contextvm.TagSupportEncryption, "") {
						t.Errorf("initialize response tags %v lack support_encryption", res.InitTags)
					}
				})
			}
		}
	}
}

func checkTSClientResult(t *testing.T, res tsClientResult, serverName string) {
	t.Helper()
	if !res.OK {
		t.Fatalf("TS client failed: %s", res.Error)
	}
	if res.ServerInfo.Name != serverName || res.ProtocolVersion != contextvm.ProtocolVersion {
		t.Errorf("server %q protocol %q", res.ServerInfo.Name, res.ProtocolVersion)
	}
	for _, want := range []string{"add", "echo", "slow"} {
		if !slices.Contains(res.Tools, want) {
			t.Errorf("tools %v lack %s", res.Tools, want)
		}
	}
	if res.Echo != "héllo 🌍" {
		t.Errorf("echo %q", res.Echo)
	}
	if res.Add["sum"] != float64(5) {
		t.Errorf("add %v", res.Add)
	}
	if res.Slow != "done" {
		t.Errorf("slow %q", res.Slow)
	}
	checkPeerProgress(t, "slow", res.Progress, []float64{1, 2, 3}, res.ProgressProbe, max(tsClientSlowDelay, cvmProgressSettle))
}

func hasTag(tags [][]string, name, value string) bool {
	for _, tag := range tags {
		if len(tag) > 0 && tag[0] == name && (value == "" || len(tag) > 1 && tag[1] == value) {
			return true
		}
	}
	return false
}

// goClientExpectation: reference semantics plus the improvement that an
// optional cvm client reaches a server with encryption disabled.
func goClientExpectation(server, client string) bool {
	switch {
	case server == "optional", server == client:
		return true
	case server == "disabled":
		return client == "optional" // plaintext fallback
	case server == "required":
		return client == "optional"
	}
	return false
}

// TestGoClient_TSServer: a cvm client against the reference TS server.
func TestGoClient_TSServer(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	for _, sMode := range modes {
		for _, cMode := range modes {
			for _, wrap := range []string{"ephemeral", "persistent"} {
				name := fmt.Sprintf("server=%s/client=%s/wrap=%s", sMode, cMode, wrap)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					server := startTSServer(t, r.URL, sMode, "optional", nil)
					enc, _ := contextvm.ParseEncryptionMode(cMode)
					gw, _ := contextvm.ParseGiftWrapMode(wrap)
					err := goClientRun(t, contextvm.ClientOptions{
						Server:            server,
						Relays:            []string{r.URL},
						Encryption:        enc,
						GiftWrap:          gw,
						RequestTimeout:    3 * time.Second,
						PlaintextFallback: 500 * time.Millisecond,
					})
					if want := goClientExpectation(sMode, cMode); want != (err == nil) {
						t.Fatalf("err = %v; want success %v", err, want)
					}
				})
			}
		}
	}
}

// goClientRun connects, lists tools and calls them, returning the first error.
func goClientRun(t *testing.T, opts contextvm.ClientOptions) error {
	t.Helper()
	ctx, cancel := testwait.Context(t, 20*time.Second)
	defer cancel()
	cs, err := contextvm.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "cvm-interop-client", Version: "1.0.0"}, nil), opts)
	if err != nil {
		return err
	}
	defer cs.Close()
	if cs.InitializeResult().ServerInfo.Name != "ts-reference-server" || cs.InitializeResult().ProtocolVersion != contextvm.ProtocolVersion {
		return fmt.Errorf("initialize result %+v", cs.InitializeResult())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	if len(tools.Tools) < 3 {
		return fmt.Errorf("tools/list: %d tools", len(tools.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
	if err != nil {
		return err
	}
	if sum := res.StructuredContent.(map[string]any)["sum"]; sum != float64(5) {
		return fmt.Errorf("add: %v", res.StructuredContent)
	}
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3}}
	params.SetProgressToken("p1")
	res, err = cs.CallTool(ctx, params)
	if err != nil {
		return err
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "done" {
		return fmt.Errorf("slow: %q", text)
	}
	return nil
}
