package catalogpage

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/payments"
)

type fixedRate struct{ usd int64 }

func (f fixedRate) USDPerBTC(context.Context) (*big.Rat, error) { return big.NewRat(f.usd, 1), nil }

// usdPage serves a catalog whose add tool costs 0.05 usd, with rates
// (nil: none) and a budget of 200 sats a call.
func usdPage(t *testing.T, rates payments.Rates) (*Page, *fakeCaller, nostr.PubKey, *httptest.Server) {
	t.Helper()
	c := discovery.NewCatalog()
	sk := nostr.Generate()
	announce(t, c, sk, "", nostr.Tags{{"cap", "tool:add", "0.05", "usd"}})
	fc := &fakeCaller{}
	p, err := New(Options{Catalog: c, Caller: fc, Logger: slog.New(slog.DiscardHandler), Rates: rates,
		Budget: "at most 200 sats a call", MaxPerCall: 200, BudgetUnit: "sats"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { p.Close(); srv.Close() })
	return p, fc, sk.Public(), srv
}

func listedPrice(t *testing.T, srv *httptest.Server) discovery.Price {
	t.Helper()
	resp, err := http.Get(srv.URL + "/api/servers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Servers []struct{ Tools []discovery.Tool }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Servers) != 1 {
		t.Fatalf("servers: %v %+v", err, list)
	}
	for _, tool := range list.Servers[0].Tools {
		if tool.Name == "add" && tool.Price != nil {
			return *tool.Price
		}
	}
	t.Fatal("add has no price")
	return discovery.Price{}
}

// A usd price is listed with its sats at the catalog's rate, and "try it"
// quotes it in sats, up to the price at that rate plus the tolerance
// (0.05 usd at 50 000 is 100 sats; 102 with 2%).
func TestUSD_ListedInBothUnitsQuotedInSats(t *testing.T) {
	p, fc, pk, srv := usdPage(t, fixedRate{50_000})
	if got := listedPrice(t, srv); got.Amount != "0.05" || got.Unit != "usd" || got.Sats != "100" {
		t.Fatalf("listed %+v", got)
	}
	status, body := post(t, srv, p.pageToken(), `{"server":"`+pk.Hex()+`","tool":"add"}`, nil)
	var q struct {
		Code, Unit string
		Amount     int64
	}
	json.Unmarshal([]byte(body), &q)
	if status != http.StatusPaymentRequired || q.Code != CodeConfirmPayment || q.Amount != 102 || q.Unit != "sats" || fc.n() != 0 {
		t.Fatalf("quote: %d %s", status, body)
	}
	// The catalog's own entry is unchanged: the sats are the listing's.
	s, _ := p.opts.Catalog.Server(pk)
	for _, tool := range s.Tools {
		if tool.Price != nil && tool.Price.Sats != "" {
			t.Fatalf("the catalog's price was changed: %+v", tool.Price)
		}
	}
}

// Without a rate, a usd price is listed in usd only and not called.
func TestUSD_WithoutARateNotCalled(t *testing.T) {
	p, fc, pk, srv := usdPage(t, nil)
	if got := listedPrice(t, srv); got.Sats != "" {
		t.Fatalf("listed %+v", got)
	}
	status, body := post(t, srv, p.pageToken(), `{"server":"`+pk.Hex()+`","tool":"add"}`, nil)
	if status != http.StatusConflict || !strings.Contains(body, CodeUnpayablePrice) || !strings.Contains(body, "usd rate") || fc.n() != 0 {
		t.Fatalf("try it: %d %s", status, body)
	}
}
