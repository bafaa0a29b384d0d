package quotation

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzChannelOffer: whatever a server answers, reading it for a channel
// offer never fails the answer: the body reaches the caller whole, and an
// offer is a positive whole number of sats.
func FuzzChannelOffer(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"error":{"code":-32030,"message":"m","data":{"price":{"amount":10,"unit":"sats"},"channel_pmi":"bitcoin-lightning-channel-v1"}}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"error":{"code":-32030,"data":{"price":{"amount":10,"max":20,"unit":"sats"},"channel_pmi":"bitcoin-lightning-channel-v1"}}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"error":{"code":-32030,"data":{"price":{"amount":0,"unit":"sats"},"channel_pmi":"bitcoin-lightning-channel-v1"}}}`)
	f.Add(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	f.Fuzz(func(t *testing.T, body string) {
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader([]byte(body)))}
		msat, ok := channelOffer(resp)
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != body {
			t.Fatalf("the body became %q (%v)", got, err)
		}
		if ok && (msat == 0 || msat%1000 != 0) {
			t.Fatalf("an offer of %d msat", msat)
		}
	})
}
