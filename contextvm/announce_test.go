package contextvm_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/internal/peertest"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type textIn struct {
	Text string `json:"text"`
}

// catalogServer has a common tool (translate), a plain one (echo), a
// resource, a template and a prompt.
func catalogServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "catalog", Version: "1.2.3"}, nil)
	handler := func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "translate", Description: "Translate text"}, handler)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text"}, handler)
	s.AddResource(&mcp.Resource{URI: "file:///readme", Name: "readme"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///readme", Text: "hi"}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///docs/{name}", Name: "docs"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "review"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	return s
}

func announcingOptions(r *relay.Server) contextvm.ServerOptions {
	return contextvm.ServerOptions{
		Relays:         []string{r.URL},
		Info:           contextvm.ServerInfo{Name: "Catalog", About: "announces itself", Website: "https://example.com"},
		Announce:       true,
		Prices:         []contextvm.Price{{Capability: "tool:translate", Amount: "10", Unit: "sats"}, {Capability: "prompt:review", Amount: "1-5"}, {Capability: "resource:file:///readme", Amount: "2"}},
		CommonTools:    []string{"translate"},
		ToolCategories: []string{"language"},
	}
}

// announcements waits until the relay holds announcements of author that
// satisfy done, and returns them by kind. It reads what the relay holds
// once, and again each time the author publishes an announcement or a
// deletion: a relay stores (or deletes) an event before it broadcasts it,
// so every change to what it holds comes with an event on the watch.
func announcements(t *testing.T, r *relay.Server, author nostr.PubKey, done func(map[nostr.Kind]nostr.Event) bool) map[nostr.Kind]nostr.Event {
	t.Helper()
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	watch := pool.Subscribe(nostr.Filter{Authors: []nostr.PubKey{author}, Kinds: append([]nostr.Kind{nostr.KindDeletion}, contextvm.AnnouncementKinds...), LimitZero: true}, 0)
	defer watch.Close()
	<-watch.Ready() // live from here on
	deadline := time.NewTimer(testwait.Timeout(10 * time.Second))
	defer deadline.Stop()
	for {
		ctx, cancel := testwait.Context(t, 5*time.Second)
		evts, err := pool.Query(ctx, nostr.Filter{Authors: []nostr.PubKey{author}, Kinds: contextvm.AnnouncementKinds})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		byKind := map[nostr.Kind]nostr.Event{}
		for _, e := range evts {
			byKind[e.Kind] = e
		}
		if done(byKind) {
			return byKind
		}
		select {
		case <-watch.Events():
		case <-deadline.C:
			t.Fatalf("announcements never became as expected; last seen %d kinds", len(byKind))
		}
	}
}

func hasAll(kinds ...nostr.Kind) func(map[nostr.Kind]nostr.Event) bool {
	return func(m map[nostr.Kind]nostr.Event) bool {
		for _, k := range kinds {
			if _, ok := m[k]; !ok {
				return false
			}
		}
		return true
	}
}

func tagged(tags nostr.Tags, want ...string) bool {
	return slices.ContainsFunc(tags, func(t nostr.Tag) bool { return slices.Equal(t, want) })
}

func TestAnnounce(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	srv := peertest.Serve(t, announcingOptions(r), catalogServer())
	got := announcements(t, r, srv.PublicKey(), hasAll(contextvm.AnnouncementKinds...))

	init := got[contextvm.KindServerAnnouncement]
	var res mcp.InitializeResult
	if err := json.Unmarshal([]byte(init.Content), &res); err != nil || res.ServerInfo.Name != "catalog" || res.ProtocolVersion != contextvm.ProtocolVersion || res.Capabilities.Tools == nil {
		t.Fatalf("11316 content %s (%v)", init.Content, err)
	}
	for _, want := range [][]string{{"name", "Catalog"}, {"about", "announces itself"}, {"website", "https://example.com"}, {"support_encryption"},
		{"cap", "tool:translate", "10", "sats"}, {"cap", "prompt:review", "1-5", "sats"}} {
		if !tagged(init.Tags, want...) {
			t.Errorf("11316 lacks %q: %v", want, init.Tags)
		}
	}

	tools := got[contextvm.KindToolsList]
	var list struct{ Tools []json.RawMessage }
	if err := json.Unmarshal([]byte(tools.Content), &list); err != nil || len(list.Tools) != 2 {
		t.Fatalf("11317 content %s", tools.Content)
	}
	var hash string
	for _, raw := range list.Tools {
		if !strings.Contains(string(raw), `"translate"`) {
			if _, ok := commonschema.Claimed(raw); ok {
				t.Errorf("echo, not declared common, claims a hash: %s", raw)
			}
			continue
		}
		var err error
		if hash, err = commonschema.VerifyClaim(raw); err != nil {
			t.Fatalf("translate's claim: %v in %s", err, raw)
		}
	}
	for _, want := range [][]string{{"cap", "tool:translate", "10", "sats"}, {"i", hash, "translate"}, {"k", commonschema.Namespace}, {"t", "language"}} {
		if !tagged(tools.Tags, want...) {
			t.Errorf("11317 lacks %q: %v", want, tools.Tags)
		}
	}
	if tagged(tools.Tags, "cap", "prompt:review", "1-5", "sats") {
		t.Error("11317 carries a prompt price")
	}
	for kind, key := range map[nostr.Kind]string{contextvm.KindResourcesList: `"file:///readme"`, contextvm.KindResourceTemplatesList: `"file:///docs/{name}"`, contextvm.KindPromptsList: `"review"`} {
		if !strings.Contains(got[kind].Content, key) {
			t.Errorf("%d content %s lacks %s", kind, got[kind].Content, key)
		}
	}
	if !tagged(got[contextvm.KindResourcesList].Tags, "cap", "resource:file:///readme", "2", "sats") {
		t.Errorf("11318 tags %v", got[contextvm.KindResourcesList].Tags)
	}
	if rl := got[contextvm.KindRelayList]; !tagged(rl.Tags, "r", r.URL) {
		t.Errorf("10002 tags %v", rl.Tags)
	}
}

// The server announces again when a list changes (the reference does not),
// and only the list that changed.
func TestAnnounceFollowsListChanges(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	mcpServer := catalogServer()
	srv := peertest.Serve(t, announcingOptions(r), mcpServer)
	before := announcements(t, r, srv.PublicKey(), hasAll(contextvm.AnnouncementKinds...))

	mcp.AddTool(mcpServer, &mcp.Tool{Name: "summarize"}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	after := announcements(t, r, srv.PublicKey(), func(m map[nostr.Kind]nostr.Event) bool {
		return strings.Contains(m[contextvm.KindToolsList].Content, `"summarize"`)
	})
	if after[contextvm.KindToolsList].CreatedAt <= before[contextvm.KindToolsList].CreatedAt {
		t.Error("the new tools announcement is not newer than the old one")
	}
	if after[contextvm.KindServerAnnouncement].ID != before[contextvm.KindServerAnnouncement].ID {
		t.Error("the unchanged initialize announcement was published again")
	}
}

func TestUnannounce(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	key := nostr.Generate()
	opts := announcingOptions(r)
	opts.Signer = contextvm.NewKeySigner(key)
	srv := peertest.Serve(t, opts, catalogServer())
	announcements(t, r, srv.PublicKey(), hasAll(contextvm.AnnouncementKinds...))
	srv.Close()

	// As `cvm unannounce` does it: no server, only the key.
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	n, err := contextvm.Unannounce(ctx, pool, contextvm.NewKeySigner(key))
	if err != nil || n != len(contextvm.AnnouncementKinds) {
		t.Fatalf("unannounce: %d events, %v", n, err)
	}
	announcements(t, r, key.Public(), func(m map[nostr.Kind]nostr.Event) bool { return len(m) == 0 })
	if n, err := contextvm.Unannounce(ctx, pool, contextvm.NewKeySigner(key)); err != nil || n != 0 {
		t.Fatalf("unannouncing nothing: %d, %v", n, err)
	}
}

func TestUnannounceOnClose(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	opts := announcingOptions(r)
	opts.UnannounceOnClose = true
	srv := peertest.Serve(t, opts, catalogServer())
	announcements(t, r, srv.PublicKey(), hasAll(contextvm.AnnouncementKinds...))
	srv.Close()
	announcements(t, r, srv.PublicKey(), func(m map[nostr.Kind]nostr.Event) bool { return len(m) == 0 })
}

// List responses carry the same prices and common-schema tags as the
// announcements, and tools/list claims the hash in the common tool's _meta.
func TestListResponsesCarryPricesAndSchemas(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	opts := announcingOptions(r)
	opts.Announce = false
	opts.Encryption = contextvm.EncryptDisabled
	srv := peertest.Serve(t, opts, catalogServer())

	clientKey := nostr.Generate()
	spy := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer spy.Close()
	sub := spy.Subscribe(nostr.Filter{Kinds: []nostr.Kind{contextvm.KindMessage}, Tags: nostr.TagMap{"p": {clientKey.Public().Hex()}}}, 0)
	defer sub.Close()
	<-sub.Ready()

	cs := peertest.Connect(t, contextvm.ClientOptions{Server: srv.PublicKey().Hex(), Relays: []string{r.URL}, Encryption: contextvm.EncryptDisabled, Signer: contextvm.NewKeySigner(clientKey)})
	ctx, cancel := testwait.Context(t, 10*time.Second)
	defer cancel()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var claimed string
	for _, tool := range tools.Tools {
		raw, _ := json.Marshal(tool)
		if h, err := commonschema.VerifyClaim(raw); err == nil && tool.Name == "translate" {
			claimed = h
		}
	}
	if claimed == "" {
		t.Fatalf("translate carries no verifiable claim in tools/list: %+v", tools.Tools)
	}
	if _, err := cs.ListPrompts(ctx, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		`"tools":[`:   {"i", claimed, "translate"},
		`"prompts":[`: {"cap", "prompt:review", "1-5", "sats"},
	}
	for len(want) > 0 {
		select {
		case evt := <-sub.Events():
			for key, tag := range want {
				if strings.Contains(evt.Content, key) {
					if !tagged(evt.Tags, tag...) {
						t.Errorf("response with %s lacks %q: %v", key, tag, evt.Tags)
					}
					delete(want, key)
				}
			}
		case <-ctx.Done():
			t.Fatalf("responses not seen: %v", want)
		}
	}
}

func TestParsePrice(t *testing.T) {
	for in, want := range map[string]contextvm.Price{
		"tool:translate=10":          {Capability: "tool:translate", Amount: "10", Unit: "sats"},
		"prompt:review=5-20:usd":     {Capability: "prompt:review", Amount: "5-20", Unit: "usd"},
		"resource:file:///a=b=0.5":   {Capability: "resource:file:///a=b", Amount: "0.5", Unit: "sats"},
		"resource:https://x/y?q=1=3": {Capability: "resource:https://x/y?q=1", Amount: "3", Unit: "sats"},
	} {
		got, err := contextvm.ParsePrice(in)
		if err != nil || got != want {
			t.Errorf("ParsePrice(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"translate=10", "tool:=10", "tool:x", "tool:x=", "tool:x=1e3", "tool:x=5-2", "tool:x=NaN", "tool:x=1:two words", "widget:x=1"} {
		if _, err := contextvm.ParsePrice(bad); err == nil {
			t.Errorf("ParsePrice(%q) accepted", bad)
		}
	}
	// Money that cannot be: refused saying why.
	for bad, why := range map[string]string{
		"tool:x=-1":                      "cannot be negative",
		"tool:x=-1-5":                    "cannot be negative",
		"tool:x=1--5":                    "cannot be negative",
		"tool:x=5-":                      "no amount",
		"tool:x=9007199254740993":        "more than any price can be",
		"tool:x=1-100000000000000000000": "more than any price can be",
		"tool:x=1.2.3":                   "not a non-negative decimal number",
	} {
		if _, err := contextvm.ParsePrice(bad); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParsePrice(%q) = %v, want an error saying %q", bad, err, why)
		}
	}
	if p, err := contextvm.ParsePrice("tool:x=9007199254740992"); err != nil {
		t.Errorf("the largest price: %+v, %v", p, err)
	}
	if p, err := contextvm.ParseCapTag(nostr.Tag{"cap", "tool:x", "3"}); err != nil || p.Unit != "sats" {
		t.Errorf("cap tag without unit: %+v, %v", p, err)
	}
}
