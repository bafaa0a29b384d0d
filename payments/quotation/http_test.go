package quotation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func aliceCaller(context.Context) (string, bool) { return alice, true }

// served runs body through the middleware and reports whether it reached
// the next handler, and the answer.
func served(t testing.TB, h quotation.HTTP, body string) (bool, *httptest.ResponseRecorder) {
	reached := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true })
	rec := httptest.NewRecorder()
	h.Middleware(next).ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", strings.NewReader(body)))
	return reached, rec
}

func TestHTTP_PricedCallNeverReachesMCPUnpaid(t *testing.T) {
	r := newRig(t, nil)
	h := quotation.HTTP{Desk: r.desk, Caller: aliceCaller}
	for _, c := range []struct {
		name, body string
		status     int
		code       int64
	}{
		{"no quotation", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"translate","arguments":{}}}`, 200, quotation.CodeQuotationRequired},
		{"unknown quotation", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"translate","_meta":{"nip10/quotation_id":"x"}}}`, 200, quotation.CodeQuotationUnknown},
		{"name in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"free","Name":"translate"}}`, 400, 0},
		{"in a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"translate"}}]`, 400, 0},
	} {
		reached, rec := served(t, h, c.body)
		if reached || rec.Code != c.status {
			t.Errorf("%s: reached MCP %v, status %d %s", c.name, reached, rec.Code, rec.Body)
			continue
		}
		if c.code != 0 {
			var resp struct{ Error struct{ Code int64 } }
			json.Unmarshal(rec.Body.Bytes(), &resp)
			if resp.Error.Code != c.code {
				t.Errorf("%s: %s, want code %d", c.name, rec.Body, c.code)
			}
		}
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"free"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"free"}}]`,
		`not json`,
	} {
		if reached, rec := served(t, h, body); !reached {
			t.Errorf("%s did not pass through: %d %s", body, rec.Code, rec.Body)
		}
	}
}

// A paid call that MCP's transport refuses with an HTTP error did not run:
// its quotation pays for the call sent again. One it accepted is spent.
func TestHTTP_CallRefusedBeforeMCPKeepsItsQuotation(t *testing.T) {
	r := newRig(t, nil)
	h := quotation.HTTP{Desk: r.desk, Caller: aliceCaller}
	q := r.quote(alice, args)
	if err := r.desk.Confirm(context.Background(), alice, q.ID, r.pay(q)); err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"translate","arguments":{"text":"hello","to":"fr"},"_meta":{"nip10/quotation_id":"` + q.ID + `"}}}`
	send := func(status int) *httptest.ResponseRecorder {
		next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if status == http.StatusBadRequest {
				http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", status)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
		})
		rec := httptest.NewRecorder()
		h.Middleware(next).ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", strings.NewReader(body)))
		return rec
	}
	for range 2 {
		if rec := send(http.StatusBadRequest); rec.Code != http.StatusBadRequest {
			t.Fatalf("refused call: %d %s", rec.Code, rec.Body)
		}
	}
	if rec := send(http.StatusOK); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "error") {
		t.Fatalf("the call sent again: %d %s", rec.Code, rec.Body)
	}
	rec := send(http.StatusOK)
	var resp struct{ Error struct{ Code int64 } }
	json.Unmarshal(rec.Body.Bytes(), &resp)
	if resp.Error.Code != quotation.CodeQuotationSpent {
		t.Fatalf("a third call on a quotation that paid for one: %s", rec.Body)
	}
}

func FuzzMiddleware(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"translate","_meta":{"nip10/quotation_id":"x"}}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"nip10/quote","params":{"name":"translate","arguments":{"a":[1,2]}}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"nip10/confirm","params":{"quotation_id":"x","payment_proof":"00"}}`)
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"translate"}}]`)
	f.Fuzz(func(t *testing.T, body string) {
		r := newRig(t, nil)
		h := quotation.HTTP{Desk: r.desk, Caller: aliceCaller}
		reached, _ := served(t, h, body)
		// Nothing here has paid: a priced call must never get through.
		if !reached {
			return
		}
		// What MCP would see: the go-sdk's reading of the message, and an
		// exact-key reading of its params (as a JavaScript upstream's).
		msg, err := jsonrpc.DecodeMessage([]byte(body))
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || !req.IsCall() || req.Method != "tools/call" {
			return
		}
		var exact map[string]json.RawMessage
		var ci struct{ Name string }
		json.Unmarshal(req.Params, &exact)
		json.Unmarshal(req.Params, &ci)
		if string(exact["name"]) == `"translate"` || ci.Name == "translate" {
			t.Fatalf("unpaid priced call reached MCP: %s", body)
		}
	})
}
