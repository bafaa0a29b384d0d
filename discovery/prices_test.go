package discovery_test

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
)

// pricedServer announces the translate tool and a prompt "brief", with
// capTags on the announcement of kind on.
func pricedServer(t *testing.T, sk nostr.SecretKey, on nostr.Kind, capTags ...nostr.Tag) []nostr.Event {
	t.Helper()
	tool, hash := commonTranslate(t)
	tags := map[nostr.Kind][]nostr.Tag{on: capTags}
	return []nostr.Event{
		sign(t, sk, contextvm.KindServerAnnouncement, 1000, initContent("x"), append([]nostr.Tag{{"name", "X"}}, tags[contextvm.KindServerAnnouncement]...)...),
		sign(t, sk, contextvm.KindToolsList, 1000, `{"tools":[`+tool+`]}`, append([]nostr.Tag{{"i", hash, "translate"}}, tags[contextvm.KindToolsList]...)...),
		sign(t, sk, contextvm.KindPromptsList, 1000, `{"prompts":[{"name":"brief"}]}`, tags[contextvm.KindPromptsList]...),
		sign(t, sk, contextvm.KindResourcesList, 1000, `{"resources":[{"uri":"file:///a.txt"}]}`, tags[contextvm.KindResourcesList]...),
	}
}

func priceOf(t *testing.T, evts []nostr.Event) (discovery.Server, *discovery.Price) {
	t.Helper()
	c := discovery.NewCatalog()
	addAll(t, c, evts...)
	s, ok := c.Server(evts[0].PubKey)
	if !ok || len(s.Tools) != 1 {
		t.Fatalf("server %+v", s)
	}
	return s, s.Tools[0].Price
}

// Seed 000's own example names the tool bare: ["cap","get_weather","100","sats"].
func TestPrices_BareNamesAreReadByTheirList(t *testing.T) {
	sk := nostr.Generate()
	for name, tc := range map[string]struct {
		on   nostr.Kind
		tags []nostr.Tag
		want string
	}{
		"bare on the tools list":          {contextvm.KindToolsList, []nostr.Tag{{"cap", "translate", "100", "sats"}}, "100 sats"},
		"prefixed on the tools list":      {contextvm.KindToolsList, []nostr.Tag{{"cap", "tool:translate", "7", "usd"}}, "7 usd"},
		"bare on the server announcement": {contextvm.KindServerAnnouncement, []nostr.Tag{{"cap", "translate", "3"}}, "3 sats"},
		"bare range":                      {contextvm.KindToolsList, []nostr.Tag{{"cap", "translate", "5-20", "sats"}}, "5-20 sats"},
		"no cap tag":                      {contextvm.KindToolsList, nil, "free"},
	} {
		_, p := priceOf(t, pricedServer(t, sk, tc.on, tc.tags...))
		if got := p.String(); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}

	// A bare name on the prompts list prices the prompt, not a tool of the
	// same name; on the resources list, a URI needs no prefix.
	s, p := priceOf(t, append(pricedServer(t, sk, contextvm.KindPromptsList, nostr.Tag{"cap", "brief", "2", "sats"})[:2],
		sign(t, sk, contextvm.KindPromptsList, 1000, `{"prompts":[{"name":"brief"}]}`, nostr.Tag{"cap", "brief", "2", "sats"}),
		sign(t, sk, contextvm.KindResourcesList, 1000, `{"resources":[{"uri":"file:///a.txt"}]}`, nostr.Tag{"cap", "file:///a.txt", "4", "sats"})))
	if p != nil || s.Prompts[0].Price.String() != "2 sats" || s.Resources[0].Price.String() != "4 sats" {
		t.Errorf("tool %v, prompt %v, resource %v", p, s.Prompts[0].Price, s.Resources[0].Price)
	}
}

// A price that names its tool but cannot be read is unknown: never free,
// never within a price bound, never ranked cheapest.
func TestPrices_UnreadableIsUnknown(t *testing.T) {
	sk := nostr.Generate()
	for name, tag := range map[string]nostr.Tag{
		"no amount":      {"cap", "translate"},
		"not a number":   {"cap", "translate", "ten", "sats"},
		"negative":       {"cap", "tool:translate", "-5", "sats"},
		"range backward": {"cap", "translate", "9-3", "sats"},
	} {
		s, p := priceOf(t, pricedServer(t, sk, contextvm.KindToolsList, tag))
		if p == nil || p.Unknown == "" || !math.IsInf(p.High(), 1) || !strings.HasPrefix(p.String(), "price unknown") {
			t.Errorf("%s: price %+v (%s)", name, p, p)
		}
		zero := 0.0
		huge := 1e18
		for _, max := range []*float64{&zero, &huge} {
			if (discovery.Filter{MaxPrice: max}).Match(s) {
				t.Errorf("%s: an unknown price passes --max-price %g", name, *max)
			}
		}
	}
	// A readable price for the tool beside an unreadable one is used.
	_, p := priceOf(t, pricedServer(t, sk, contextvm.KindToolsList, nostr.Tag{"cap", "translate", "x"}, nostr.Tag{"cap", "translate", "4"}))
	if p.String() != "4 sats" {
		t.Errorf("readable beside unreadable: %s", p)
	}
}

// A bare cap tag that names nothing the server lists prices nothing, and
// says so.
func TestPrices_BareNameOnNoList(t *testing.T) {
	sk := nostr.Generate()
	s, p := priceOf(t, pricedServer(t, sk, contextvm.KindServerAnnouncement, nostr.Tag{"cap", "get_weather", "100", "sats"}))
	if p != nil || len(s.PriceWarnings) != 1 || !strings.Contains(s.PriceWarnings[0], `"get_weather" names no tool, prompt or resource`) {
		t.Errorf("price %v, warnings %q", p, s.PriceWarnings)
	}
	s, p = priceOf(t, pricedServer(t, sk, contextvm.KindToolsList, nostr.Tag{"cap", "brief", "1"}))
	if p != nil || len(s.PriceWarnings) != 1 || !strings.Contains(s.PriceWarnings[0], "the tool list has no such tool") {
		t.Errorf("a prompt's name on the tools list: price %v, warnings %q", p, s.PriceWarnings)
	}
}

func provider(name string, price *discovery.Price) discovery.Provider {
	return discovery.Provider{Server: discovery.Server{Name: name, Pubkey: nostr.Generate().Public()}, Tool: discovery.Tool{Name: "t", Price: price}}
}

func names(ps []discovery.Provider) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Server.Name)
	}
	return strings.Join(out, ",")
}

func TestChoose_Order(t *testing.T) {
	now := time.Now()
	sats := func(a string) *discovery.Price { return &discovery.Price{Amount: a, Unit: "sats"} }
	free := provider("free", nil)
	cheap := provider("cheap", sats("1"))
	dear := provider("dear", sats("5"))
	rangeTop := provider("range", sats("0-9"))
	usd := provider("usd", &discovery.Price{Amount: "0.01", Unit: "usd"})
	eur := provider("eur", &discovery.Price{Amount: "0.001", Unit: "eur"})
	unknown := provider("unknown", &discovery.Price{Amount: "x", Unit: "sats", Unknown: `amount "x"`})
	all := []discovery.Provider{unknown, usd, eur, dear, rangeTop, cheap, free}

	// Price in the default unit, then other units by name (never compared
	// as numbers: 0.001 eur is not "cheaper" than 1 sat), unknown last.
	ps := append([]discovery.Provider(nil), all...)
	discovery.Choose(ps, discovery.Ranking{Policy: discovery.AnyProvider, Now: now})
	if got, want := names(ps), "free,cheap,dear,range,eur,usd,unknown"; got != want {
		t.Errorf("by price: %s, want %s", got, want)
	}
	if u := discovery.Units(ps); strings.Join(u, ",") != "sats,eur,usd,unknown" {
		t.Errorf("units %v", u)
	}
	if u := discovery.Units([]discovery.Provider{free, cheap, dear}); u != nil {
		t.Errorf("one unit: %v", u)
	}

	// Trust comes first: a trusted dear provider before an untrusted free one.
	ps = append([]discovery.Provider(nil), all...)
	discovery.Choose(ps, discovery.Ranking{Policy: discovery.TrustedFirst, Trusted: map[nostr.PubKey]bool{dear.Server.Pubkey: true, usd.Server.Pubkey: true}, Now: now})
	if got, want := names(ps), "dear,usd,free,cheap,range,eur,unknown"; got != want {
		t.Errorf("trusted first: %s, want %s", got, want)
	}

	// Among equal prices: the fastest remembered, then the never answered,
	// and a provider that just failed counts as never answered and goes
	// after those that did not fail.
	h := discovery.OpenHistory("")
	a, b, c, d := provider("a", sats("1")), provider("b", sats("1")), provider("c", sats("1")), provider("d", sats("1"))
	h.Succeeded(a.Server.Pubkey, 300*time.Millisecond, now)
	h.Succeeded(b.Server.Pubkey, 100*time.Millisecond, now)
	h.Succeeded(c.Server.Pubkey, 50*time.Millisecond, now.Add(-time.Minute))
	h.Failed(c.Server.Pubkey, now)
	ps = []discovery.Provider{c, d, a, b}
	discovery.Choose(ps, discovery.Ranking{Policy: discovery.AnyProvider, History: h, Now: now})
	if got, want := names(ps), "b,a,d,c"; got != want {
		t.Errorf("latency and failures: %s, want %s", got, want)
	}
	// A failure past the cooldown no longer counts.
	discovery.Choose(ps, discovery.Ranking{Policy: discovery.AnyProvider, History: h, Now: now.Add(discovery.FailureCooldown + time.Second)})
	if got, want := names(ps), "c,b,a,d"; got != want {
		t.Errorf("after the cooldown: %s, want %s", got, want)
	}
}

func TestProviders_TrustedOnlyLeavesStrangersOut(t *testing.T) {
	c := discovery.NewCatalog()
	a, b := nostr.Generate(), nostr.Generate()
	addAll(t, c, announce(t, a, 1000, "A", "5", true)...)
	addAll(t, c, announce(t, b, 1000, "B", "1", true)...)
	_, hash := commonTranslate(t)
	ps, excluded := c.Providers(hash, discovery.Ranking{}) // the zero policy: trusted only
	if len(ps) != 0 || excluded != 2 {
		t.Fatalf("no trust list: %d providers, %d excluded", len(ps), excluded)
	}
	ps, excluded = c.Providers(hash, discovery.Ranking{Trusted: map[nostr.PubKey]bool{a.Public(): true}})
	if names(ps) != "A" || excluded != 1 {
		t.Fatalf("trusting A: %s, %d excluded", names(ps), excluded)
	}
	for _, s := range []string{"trusted-only", "trusted-first", "any", "reputation"} {
		if p, err := discovery.ParseTrustPolicy(s); err != nil || p.String() != s {
			t.Errorf("%s: %v %v", s, p, err)
		}
	}
	if _, err := discovery.ParseTrustPolicy("some"); err == nil {
		t.Error("an unknown policy was accepted")
	}
}

// A usd price is shown with what it comes to in sats at the viewer's
// rate, rounded up as servers round it; other prices are left alone.
func TestPrice_InSatsBesideUSD(t *testing.T) {
	rate := big.NewRat(97_123_45, 100) // 97 123.45 usd a bitcoin
	for _, tc := range []struct {
		in   *discovery.Price
		want string
	}{
		{&discovery.Price{Amount: "0.05", Unit: "usd"}, "0.05 usd (≈ 52 sats)"},
		{&discovery.Price{Amount: "0.05-0.1", Unit: "usd"}, "0.05-0.1 usd (≈ 52-103 sats)"},
		{&discovery.Price{Amount: "10", Unit: "sats"}, "10 sats"},
		{&discovery.Price{Amount: "x", Unit: "usd", Unknown: `amount "x"`}, `price unknown (amount "x")`},
		{nil, "free"},
	} {
		if got := tc.in.InSats(rate).String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// fixedReputation grades providers by name: bands, and who is admitted.
type fixedReputation struct {
	band  map[nostr.PubKey]int
	admit map[nostr.PubKey]bool
}

func (f fixedReputation) Band(pk nostr.PubKey) int    { return f.band[pk] }
func (f fixedReputation) Admits(pk nostr.PubKey) bool { return f.admit[pk] }

func TestChoose_ReputationAfterTrustBeforePrice(t *testing.T) {
	sats := func(a string) *discovery.Price { return &discovery.Price{Amount: a, Unit: "sats"} }
	cheap, dear, mid, trusted := provider("cheap", sats("1")), provider("dear", sats("9")), provider("mid", sats("5")), provider("trusted", sats("20"))
	rep := fixedReputation{
		band:  map[nostr.PubKey]int{dear.Server.Pubkey: 8, mid.Server.Pubkey: 8, cheap.Server.Pubkey: 4},
		admit: map[nostr.PubKey]bool{dear.Server.Pubkey: true, mid.Server.Pubkey: true},
	}
	trust := map[nostr.PubKey]bool{trusted.Server.Pubkey: true}
	ps := []discovery.Provider{cheap, dear, mid, trusted}
	discovery.Choose(ps, discovery.Ranking{Policy: discovery.TrustedFirst, Trusted: trust, Reputation: rep})
	if got, want := names(ps), "trusted,mid,dear,cheap"; got != want {
		t.Errorf("trust, reputation, price: %s, want %s", got, want)
	}

	c := discovery.NewCatalog()
	keys := []nostr.SecretKey{nostr.Generate(), nostr.Generate(), nostr.Generate()}
	for i, name := range []string{"A", "B", "C"} {
		addAll(t, c, announce(t, keys[i], 1000, name, "1", true)...)
	}
	_, hash := commonTranslate(t)
	admitB := fixedReputation{admit: map[nostr.PubKey]bool{keys[1].Public(): true}}
	got, excluded := c.Providers(hash, discovery.Ranking{Policy: discovery.ByReputation, Trusted: map[nostr.PubKey]bool{keys[2].Public(): true}, Reputation: admitB})
	if names(got) != "C,B" || excluded != 1 {
		t.Errorf("by reputation: %s, %d excluded; want C (trusted), B (admitted), 1 excluded", names(got), excluded)
	}
	if got, excluded := c.Providers(hash, discovery.Ranking{Policy: discovery.ByReputation}); len(got) != 0 || excluded != 3 {
		t.Errorf("by reputation without one: %s, %d excluded; want none", names(got), excluded)
	}
}
