package zap_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/zap"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// An LNURL-pay endpoint that cannot be paid by zap (no allowsNostr, no
// nostrPubkey, a redirect to a private address, too long an answer, no
// answer in time, an invoice for another amount or another description)
// makes Require fail with a clear error: nothing is asked for, so
// nothing is paid.
func TestRequire_RefusesLNURLEndpointsThatCannotBePaidByZap(t *testing.T) {
	zapper := nostr.Generate().Public().Hex()
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	net.AddWallet("srv", 0)
	badInvoice, err := net.MakeInvoice("srv", 10_000, "not a zap request", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wrongAmount, err := net.MakeInvoice("srv", 9_000, "x", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	params := func(srv string, extra string) string {
		return fmt.Sprintf(`{"tag":"payRequest","callback":"%s/cb","minSendable":1000,"maxSendable":100000000,"metadata":"[]"%s}`, srv, extra)
	}
	r := relaytest.Start(t, relay.Options{})
	for _, c := range []struct {
		name  string
		serve func(srv string) http.HandlerFunc
		want  error
		says  string
	}{
		{"no allowsNostr", func(srv string) http.HandlerFunc {
			return answerJSON(params(srv, `,"nostrPubkey":"`+zapper+`"`), "")
		}, zap.ErrPayParams, "allowsNostr"},
		{"no nostrPubkey", func(srv string) http.HandlerFunc {
			return answerJSON(params(srv, `,"allowsNostr":true`), "")
		}, zap.ErrPayParams, "nostrPubkey"},
		{"a redirect to a private address", func(string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "https://10.0.0.1/x", http.StatusFound)
			}
		}, outbound.ErrRedirected, "redirect"},
		{"too long an answer", func(srv string) http.HandlerFunc {
			return answerJSON(params(srv, `,"allowsNostr":true,"nostrPubkey":"`+zapper+`","pad":"`+strings.Repeat("x", 70<<10)+`"`), "")
		}, outbound.ErrTooLarge, "too large"},
		{"no answer in time", func(string) http.HandlerFunc {
			return func(_ http.ResponseWriter, r *http.Request) {
				select {
				case <-stop:
				case <-r.Context().Done():
				}
			}
		}, outbound.ErrTimeout, "timed out"},
		{"an invoice for another amount", func(srv string) http.HandlerFunc {
			return answerJSON(params(srv, `,"allowsNostr":true,"nostrPubkey":"`+zapper+`"`), wrongAmount.Bolt11)
		}, zap.ErrInvoice, "9000 msat"},
		{"an invoice for another description", func(srv string) http.HandlerFunc {
			return answerJSON(params(srv, `,"allowsNostr":true,"nostrPubkey":"`+zapper+`"`), badInvoice.Bolt11)
		}, zap.ErrInvoice, "description hash"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			var h http.HandlerFunc
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r) }))
			srv.StartTLS()
			t.Cleanup(srv.Close)
			h = c.serve(srv.URL)
			addr, err := zap.ParseAddress("srv@" + strings.TrimPrefix(srv.URL, "https://"))
			if err != nil {
				t.Fatal(err)
			}
			// The fetcher's deadline is the behaviour under test in
			// "no answer in time"; short, so that the test is too.
			fetcher := outbound.New(outbound.Options{Timeout: testwait.Timeout(2 * time.Second),
				Allow: []netip.AddrPort{netip.MustParseAddrPort(srv.Listener.Addr().String())}, ExtraRoots: []*x509.Certificate{srv.Certificate()}})
			p, err := zap.NewProcessor(zap.Options{Address: addr, Key: nostr.Generate(), Relays: []string{r.URL},
				Store: durable.NewMemory(durable.Options{}), Fetcher: fetcher})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			_, err = p.Require(context.Background(), payments.Charge{Amount: 10, Unit: "sats"})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Require: %v; want %v saying %q", err, c.want, c.says)
			}
		})
	}
	close(stop)
}

// answerJSON answers the parameters, and the invoice pr at the callback.
func answerJSON(params, pr string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/cb") {
			fmt.Fprintf(w, `{"pr":%q,"routes":[]}`, pr)
			return
		}
		fmt.Fprint(w, params)
	}
}
