package discovery_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
)

func sign(t testing.TB, sk nostr.SecretKey, kind nostr.Kind, at nostr.Timestamp, content string, tags ...nostr.Tag) nostr.Event {
	t.Helper()
	evt := nostr.Event{Kind: kind, CreatedAt: at, Content: content, Tags: nostr.Tags(tags)}
	if evt.Tags == nil {
		evt.Tags = nostr.Tags{}
	}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

const translateTool = `{"name":"translate","description":"Translate text","inputSchema":{"type":"object","properties":{"text":{"type":"string"},"to":{"type":"string"}},"required":["text","to"]}}`

func initContent(name string) string {
	return fmt.Sprintf(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":%q,"version":"1.0.0"}}`, name)
}

// commonTranslate returns the translate tool annotated with its hash.
func commonTranslate(t testing.TB) (string, string) {
	t.Helper()
	annotated, hash, err := commonschema.Annotate([]byte(translateTool))
	if err != nil {
		t.Fatal(err)
	}
	return string(annotated), hash
}

// announce returns the announcements of a translation server.
func announce(t testing.TB, sk nostr.SecretKey, at nostr.Timestamp, name, price string, enc bool) []nostr.Event {
	t.Helper()
	tool, hash := commonTranslate(t)
	initTags := []nostr.Tag{{"name", name}, {"about", "translates"}}
	if enc {
		initTags = append(initTags, nostr.Tag{"support_encryption"})
	}
	return []nostr.Event{
		sign(t, sk, contextvm.KindServerAnnouncement, at, initContent(strings.ToLower(name)), initTags...),
		sign(t, sk, contextvm.KindToolsList, at, `{"tools":[`+tool+`,{"name":"echo","inputSchema":{"type":"object"}}]}`,
			nostr.Tag{"cap", "tool:translate", price, "sats"}, nostr.Tag{"i", hash, "translate"}, nostr.Tag{"k", commonschema.Namespace}, nostr.Tag{"t", "language"}),
		sign(t, sk, contextvm.KindRelayList, at, "", nostr.Tag{"r", "wss://relay.example.com/"}),
	}
}

func addAll(t testing.TB, c *discovery.Catalog, evts ...nostr.Event) {
	t.Helper()
	for _, e := range evts {
		if _, err := c.Add(e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCatalog_ReadsAnnouncements(t *testing.T) {
	c := discovery.NewCatalog()
	sk := nostr.Generate()
	addAll(t, c, announce(t, sk, 1000, "Translator", "10", true)...)
	servers := c.Servers(discovery.Filter{})
	if len(servers) != 1 {
		t.Fatalf("%d servers", len(servers))
	}
	s := servers[0]
	_, hash := commonTranslate(t)
	if s.Name != "Translator" || s.About != "translates" || !s.Encryption || s.ServerInfo.Name != "translator" ||
		s.Pubkey != sk.Public() || !strings.HasPrefix(s.Npub, "npub1") || s.UpdatedAt.Unix() != 1000 {
		t.Errorf("server %+v", s)
	}
	if len(s.Relays) != 1 || s.Relays[0] != "wss://relay.example.com" || len(s.Categories) != 1 || s.Categories[0] != "language" {
		t.Errorf("relays %v categories %v", s.Relays, s.Categories)
	}
	if len(s.Tools) != 2 {
		t.Fatalf("tools %+v", s.Tools)
	}
	tr, echo := s.Tools[0], s.Tools[1]
	if tr.Name != "translate" || !tr.Verified || tr.SchemaHash != hash || tr.Price == nil || tr.Price.Amount != "10" || tr.Price.Unit != "sats" {
		t.Errorf("translate %+v", tr)
	}
	if echo.Verified || echo.SchemaHash != "" || echo.Price != nil {
		t.Errorf("echo %+v", echo)
	}
	out, _ := json.Marshal(s)
	for _, key := range []string{`"pubkey":"` + sk.Public().Hex() + `"`, `"price":{"amount":"10","unit":"sats"}`, `"price":null`, `"verified":true`, `"updatedAt":"1970-01-01T00:16:40Z"`} {
		if !strings.Contains(string(out), key) {
			t.Errorf("JSON lacks %s: %s", key, out)
		}
	}
}

func TestCatalog_KeepsTheNewest(t *testing.T) {
	c := discovery.NewCatalog()
	sk := nostr.Generate()
	addAll(t, c, announce(t, sk, 2000, "New", "10", false)...)
	if changed, err := c.Add(sign(t, sk, contextvm.KindServerAnnouncement, 1000, initContent("old"), nostr.Tag{"name", "Old"})); changed || err != nil {
		t.Fatalf("an older announcement: changed=%v err=%v", changed, err)
	}
	if s := c.Servers(discovery.Filter{}); s[0].Name != "New" {
		t.Fatalf("name %q", s[0].Name)
	}
}

// Bad input is skipped with a reason, never listed and never verified.
func TestCatalog_SkipsBadInput(t *testing.T) {
	c := discovery.NewCatalog()
	sk := nostr.Generate()
	forged := sign(t, sk, contextvm.KindServerAnnouncement, 1000, initContent("forged"))
	forged.Content = initContent("tampered")
	for name, evt := range map[string]nostr.Event{
		"invalid JSON":    sign(t, nostr.Generate(), contextvm.KindServerAnnouncement, 1000, `{"serverInfo":`),
		"missing fields":  sign(t, nostr.Generate(), contextvm.KindServerAnnouncement, 1000, `{"capabilities":{}}`),
		"wrong kind":      sign(t, nostr.Generate(), 1, 1000, initContent("note")),
		"forged":          forged,
		"tools not array": sign(t, nostr.Generate(), contextvm.KindToolsList, 1000, `{"tools":{}}`),
	} {
		changed, err := c.Add(evt)
		if changed || !errors.Is(err, discovery.ErrSkipped) {
			t.Errorf("%s: changed=%v err=%v", name, changed, err)
		}
	}
	if n := len(c.Skipped()); n != 5 {
		t.Errorf("%d skipped, want 5: %+v", n, c.Skipped())
	}
	if s := c.Servers(discovery.Filter{}); len(s) != 0 {
		t.Errorf("listed %d servers from bad input", len(s))
	}

	// A false claim: the hash of another schema.
	liar := nostr.Generate()
	_, hash := commonTranslate(t)
	other := strings.Replace(translateTool, `"to"`, `"lang"`, -1)
	claim := strings.Replace(other, `"description"`, `"_meta":{"io.contextvm/common-schema":{"schemaHash":"`+hash+`"}},"description"`, 1)
	addAll(t, c,
		sign(t, liar, contextvm.KindServerAnnouncement, 1000, initContent("liar"), nostr.Tag{"name", "Liar"}),
		sign(t, liar, contextvm.KindToolsList, 1000, `{"tools":[`+claim+`]}`, nostr.Tag{"i", hash, "translate"}))
	s, ok := c.Server(liar.Public())
	if !ok || len(s.Tools) != 1 || s.Tools[0].Verified || !strings.Contains(s.Tools[0].SchemaError, "mismatch") {
		t.Fatalf("a false claim: %+v", s.Tools)
	}
	if got := c.Servers(discovery.Filter{SchemaHash: hash}); len(got) != 0 {
		t.Errorf("a false claim selected by its hash")
	}
}

func TestCatalog_Deletion(t *testing.T) {
	c := discovery.NewCatalog()
	sk := nostr.Generate()
	evts := announce(t, sk, 1000, "Gone", "10", false)
	addAll(t, c, evts...)
	del := sign(t, sk, nostr.KindDeletion, 1500, "", nostr.Tag{"a", "11316:" + sk.Public().Hex() + ":"}, nostr.Tag{"e", evts[1].ID.Hex()})
	if changed, _ := c.Add(del); !changed {
		t.Fatal("the deletion changed nothing")
	}
	if _, ok := c.Server(sk.Public()); ok {
		t.Fatal("a deleted server is listed")
	}
	// A relay that returns the deleted version afterwards does not revive it.
	if changed, _ := c.Add(evts[0]); changed {
		t.Fatal("a deleted announcement came back")
	}
	// Someone else cannot delete it.
	other := discovery.NewCatalog()
	addAll(t, other, evts...)
	mallory := nostr.Generate()
	other.Add(sign(t, mallory, nostr.KindDeletion, 1500, "", nostr.Tag{"a", "11316:" + sk.Public().Hex() + ":"}, nostr.Tag{"e", evts[0].ID.Hex()}))
	if _, ok := other.Server(sk.Public()); !ok {
		t.Fatal("another key deleted the server")
	}
	// A newer announcement after the deletion is listed again.
	addAll(t, c, sign(t, sk, contextvm.KindServerAnnouncement, 2000, initContent("back"), nostr.Tag{"name", "Back"}))
	if s, ok := c.Server(sk.Public()); !ok || s.Name != "Back" {
		t.Fatalf("re-announced: %+v %v", s, ok)
	}
}

func TestFilter(t *testing.T) {
	c := discovery.NewCatalog()
	cheap, dear, plain := nostr.Generate(), nostr.Generate(), nostr.Generate()
	addAll(t, c, announce(t, cheap, 1000, "Cheap", "5", true)...)
	addAll(t, c, announce(t, dear, 1000, "Dear", "10-50", false)...)
	addAll(t, c, sign(t, plain, contextvm.KindServerAnnouncement, 1000, initContent("plain"), nostr.Tag{"name", "Plain"}),
		sign(t, plain, contextvm.KindToolsList, 1000, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`))
	_, hash := commonTranslate(t)
	price := func(f float64) *float64 { return &f }
	for name, tc := range map[string]struct {
		f    discovery.Filter
		want []string
	}{
		"all":                   {discovery.Filter{}, []string{"Cheap", "Dear", "Plain"}},
		"tool":                  {discovery.Filter{Tool: "echo"}, []string{"Cheap", "Dear", "Plain"}},
		"schema":                {discovery.Filter{SchemaHash: hash}, []string{"Cheap", "Dear"}},
		"category":              {discovery.Filter{Category: "language"}, []string{"Cheap", "Dear"}},
		"encrypted":             {discovery.Filter{Encrypted: true}, []string{"Cheap"}},
		"max price, range top":  {discovery.Filter{SchemaHash: hash, MaxPrice: price(20)}, []string{"Cheap"}},
		"max price, free tools": {discovery.Filter{MaxPrice: price(0)}, []string{"Cheap", "Dear", "Plain"}},
		"max price of a tool":   {discovery.Filter{Tool: "translate", MaxPrice: price(50)}, []string{"Cheap", "Dear"}},
		"nothing":               {discovery.Filter{Tool: "missing"}, nil},
	} {
		var got []string
		for _, s := range c.Servers(tc.f) {
			got = append(got, s.Name)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func FuzzCatalogAdd(f *testing.F) {
	tool, hash := commonTranslate(f)
	f.Add(int(contextvm.KindServerAnnouncement), initContent("x"), "name", "X")
	f.Add(int(contextvm.KindToolsList), `{"tools":[`+tool+`]}`, "i", hash)
	f.Add(int(contextvm.KindToolsList), `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`, "cap", "tool:a")
	f.Add(int(contextvm.KindRelayList), "", "r", "ws://x")
	f.Add(5, "", "a", "11316:00:")
	sk := nostr.Generate()
	f.Fuzz(func(t *testing.T, kind int, content, tag, value string) {
		c := discovery.NewCatalog()
		c.Add(sign(t, sk, contextvm.KindServerAnnouncement, 1, initContent("base")))
		c.Add(sign(t, sk, nostr.Kind(uint16(kind)), 2, content, nostr.Tag{tag, value, "translate"}, nostr.Tag{tag, value}))
		for _, s := range c.Servers(discovery.Filter{}) {
			for _, tl := range s.Tools {
				if !tl.Verified {
					continue
				}
				raw, _ := json.Marshal(map[string]any{"name": tl.Name, "inputSchema": tl.InputSchema, "outputSchema": tl.OutputSchema})
				var st commonschema.Tool
				if json.Unmarshal(raw, &st) != nil || commonschema.Verify(st, tl.SchemaHash) != nil {
					t.Fatalf("tool %q verified with a hash its schemas do not give", tl.Name)
				}
			}
		}
	})
}
