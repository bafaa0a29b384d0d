package quotation_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/did"
	"github.com/cvmgo/cvm/payments/quotation"
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
