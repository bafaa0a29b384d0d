package quotation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/didauth"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestChannelTransport_LongAnswerPassesWhole: the buyer's Transport reads
// the start of a JSON answer to a call whose cost it does not know (is it
// a refusal offering a channel?); an answer longer than a refusal reaches
// the caller whole.
func TestChannelTransport_LongAnswerPassesWhole(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("a", 3<<20) + `"}]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, long)
	}))
	defer srv.Close()
	signer, err := did.GenerateKey(did.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	b := &quotation.Buyer{URL: srv.URL, Signer: signer, Pay: &cep8.PayOptions{Channel: &cep8.ChannelOptions{DepositSats: 10}}}
	hc := &http.Client{Transport: b.Transport(nil)}
	resp, err := hc.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"long"}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != long {
		t.Fatalf("the answer arrived with %d bytes of %d (%v)", len(got), len(long), err)
	}
}

// A tool the buyer learnt is priced in usd is not paid by channel, even
// when the server offers a channel price in sats for it: the call goes
// without a receipt (to be bought by quotation, held to the client's
// rate), and no deposit is quoted.
func TestChannelTransport_USDPriceGoesByQuotation(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(body)+" "+r.Header.Get(channel.Header))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"error":{"code":%d,"message":"pay","data":{"price":{"amount":5,"unit":"sats"},"channel_pmi":%q}}}`, quotation.CodeQuotationRequired, channel.PMI)
	}))
	defer srv.Close()
	signer, err := did.GenerateKey(did.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	b := &quotation.Buyer{URL: srv.URL, Signer: signer, Pay: &cep8.PayOptions{Budget: &payments.Budget{Unit: "sats", PerCall: 10},
		Channel: &cep8.ChannelOptions{DepositSats: 10}}}
	b.Learn([]*mcp.Tool{{Name: "t", Meta: mcp.Meta{quotation.MetaPrice: map[string]any{"amount": 0.05, "unit": "usd"}}}})
	hc := &http.Client{Transport: b.Transport(nil)}
	resp, err := hc.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || strings.Contains(got[0], "nip10/quote") {
		t.Fatalf("the server got %q; want the call once, without a receipt", got)
	}
}

// FuzzChannelMiddleware: with channels offered, whatever the body and
// the X-Payment-Channel-Data header, a priced call on books with no
// channel never reaches MCP, and the middleware never fails.
func FuzzChannelMiddleware(f *testing.F) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"translate"}}`
	f.Add(call, `u`+`eyJ2ZXJzaW9uIjoxfQ`)
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"nip10/quote","params":{"channel":{"deposit":"21000","id":"0x00"}}}`, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"cvm/channel_close","params":{"channel":"0x00","invoice":"lnbc"}}`, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"nip10/confirm","params":{"quotation_id":"x","payment_proof":"00"}}`, "")
	signer, err := did.GenerateKey(did.Ed25519)
	if err != nil {
		f.Fatal(err)
	}
	key := didauth.Key{DID: signer.DID(), ID: signer.KeyID(), Public: signer.PublicKey()}
	f.Fuzz(func(t *testing.T, body, header string) {
		r := newRig(t, nil)
		books, err := channel.New(channel.Options{Store: r.store, ServerKey: []byte{1}, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		h := quotation.HTTP{Desk: r.desk, Caller: aliceCaller, Channels: books,
			CallerKey: func(context.Context) (didauth.Key, bool) { return key, true }}
		reached := false
		next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req.Header.Set(channel.Header, header)
		h.Middleware(next).ServeHTTP(httptest.NewRecorder(), req)
		if !reached {
			return
		}
		// What MCP would read (see FuzzMiddleware).
		msg, err := jsonrpc.DecodeMessage([]byte(body))
		m, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !m.IsCall() || m.Method != "tools/call" {
			return
		}
		var exact map[string]json.RawMessage
		var ci struct{ Name string }
		json.Unmarshal(m.Params, &exact)
		json.Unmarshal(m.Params, &ci)
		if string(exact["name"]) == `"translate"` || ci.Name == "translate" {
			t.Fatalf("a priced call reached MCP with no channel open: %s / %s", body, header)
		}
	})
}
