package interop

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The reference server's announcements, with a price and a common tool,
// read by cvm's catalog; then cvm calls the reference through the common
// schema, as `cvm call --schema` does.
func TestReferenceAnnouncementsInTheCatalog(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	server := startTSServer(t, r.URL, "optional", "optional", map[string]string{
		"ANNOUNCE": "1", "PRICE_ADD": "10", "COMMON_TOOLS": "add", "CATEGORIES": "math",
	})
	pk, err := nostr.PubKeyFromHex(server)
	if err != nil {
		t.Fatal(err)
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()

	awaitAnnounced(t, r.URL, pk, contextvm.KindServerAnnouncement, contextvm.KindToolsList, nostr.KindRelayListMetadata)
	fctx, fcancel := testwait.Context(t, 5*time.Second)
	c, err := discovery.Fetch(fctx, pool, discovery.Filter{})
	fcancel()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Server(pk)
	if !ok || len(s.Tools) == 0 || len(s.Relays) == 0 {
		t.Fatalf("the reference's announcements are not in the catalog: %+v, %v", s, ok)
	}
	if skipped := c.Skipped(); len(skipped) > 0 {
		t.Errorf("the catalog skipped parts of the reference's announcements: %+v", skipped)
	}
	if s.Name != "TS Reference Server" || s.About != "interop peer" || !s.Encryption || !s.EphemeralGiftWrap ||
		s.ServerInfo.Name != "ts-reference-server" || !slices.Equal(s.Relays, []string{r.URL}) || !slices.Equal(s.Categories, []string{"math"}) {
		t.Errorf("server %+v", s)
	}
	var add *discovery.Tool
	for i := range s.Tools {
		if s.Tools[i].Name == "add" {
			add = &s.Tools[i]
		} else if s.Tools[i].SchemaHash != "" {
			t.Errorf("%s claims a schema", s.Tools[i].Name)
		}
	}
	if add == nil || add.Price == nil || add.Price.Amount != "10" || add.Price.Unit != "sats" || !add.Verified || add.SchemaHash == "" {
		t.Fatalf("add: %+v (price %+v)", add, add.Price)
	}

	ctx, cancel := testwait.Context(t, 30*time.Second)
	defer cancel()
	res, err := discovery.Call(ctx, discovery.CallOptions{
		SchemaHash: add.SchemaHash, Tool: "add", Arguments: map[string]any{"a": 2, "b": 3}, Pool: pool,
		Trusted: map[nostr.PubKey]bool{pk: true},
		Client:  contextvm.ClientOptions{Signer: contextvm.NewKeySigner(nostr.Generate())},
	})
	if err != nil || res.Provider.Server.Pubkey != pk || res.Result.Content[0].(*mcp.TextContent).Text != "5" {
		t.Fatalf("call through the schema: %+v, %v", res, err)
	}
}

// cvm's announcements read by nostr-tools, with the reference SDK checking
// the common-schema claim.
func TestCVMAnnouncementsReadByNostrTools(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	s := mcp.NewServer(&mcp.Implementation{Name: "cvm-announcer", Version: "2.0.0"}, nil)
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers"}, func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.FormatFloat(in.A+in.B, 'g', -1, 64)}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	srv, err := contextvm.NewServer(ctx, contextvm.ServerOptions{
		Signer: contextvm.NewKeySigner(nostr.Generate()), Relays: []string{r.URL},
		Info:     contextvm.ServerInfo{Name: "cvm announcer", About: "read me"},
		Announce: true, Prices: []contextvm.Price{{Capability: "tool:add", Amount: "3"}, {Capability: "prompt:greet", Amount: "1-2", Unit: "usd"}},
		CommonTools: []string{"add"}, ToolCategories: []string{"math"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go srv.Serve(context.Background(), s)

	type read struct {
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Events map[string]struct {
			Valid   bool            `json:"valid"`
			Tags    [][]string      `json:"tags"`
			Content json.RawMessage `json:"content"`
		} `json:"events"`
		Tools []struct {
			Name     string `json:"name"`
			Claimed  string `json:"claimed"`
			Computed string `json:"computed"`
		} `json:"tools"`
	}
	awaitAnnounced(t, r.URL, srv.PublicKey(), contextvm.KindServerAnnouncement, contextvm.KindToolsList, contextvm.KindPromptsList, nostr.KindRelayListMetadata)
	var got read
	runScript(t, "read-announcements.mjs", map[string]string{"RELAY_URL": r.URL, "PUBKEY": srv.PublicKey().Hex()}, &got)
	if !got.OK || len(got.Events) != 4 { // 11316, 11317, 11320, 10002
		t.Fatalf("nostr-tools read %+v", got)
	}
	for kind, e := range got.Events {
		if !e.Valid {
			t.Errorf("kind %s: nostr-tools rejects the signature", kind)
		}
	}
	has := func(kind string, tag ...string) bool {
		return slices.ContainsFunc(got.Events[kind].Tags, func(t []string) bool { return slices.Equal(t, tag) })
	}
	var init mcp.InitializeResult
	if json.Unmarshal(got.Events["11316"].Content, &init) != nil || init.ServerInfo.Name != "cvm-announcer" || !has("11316", "name", "cvm announcer") {
		t.Errorf("11316: %+v", got.Events["11316"])
	}
	if len(got.Tools) != 1 || got.Tools[0].Claimed == "" || got.Tools[0].Claimed != got.Tools[0].Computed {
		t.Fatalf("the reference's hash disagrees with cvm's claim: %+v", got.Tools)
	}
	for _, tag := range [][]string{{"cap", "tool:add", "3", "sats"}, {"i", got.Tools[0].Computed, "add"}, {"k", "io.contextvm/common-schema"}, {"t", "math"}} {
		if !has("11317", tag...) {
			t.Errorf("11317 lacks %q: %v", tag, got.Events["11317"].Tags)
		}
	}
	if !has("11320", "cap", "prompt:greet", "1-2", "usd") || !has("10002", "r", r.URL) {
		t.Errorf("11320 %v, 10002 %v", got.Events["11320"].Tags, got.Events["10002"].Tags)
	}
}
