package zapsim_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/zap"
	"github.com/cvmgo/cvm/payments/zap/zapsim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The simulator's LNURL-pay endpoint answers over HTTPS that a client
// trusting only the CA file accepts (the certificate names 127.0.0.1),
// with NIP-57's fields; its callback refuses what an LNURL server must
// (NIP-57 appendix D) and answers a valid zap request with an invoice
// bound to it.
func TestServer_LightningAddressOverHTTPS(t *testing.T) {
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	net.AddWallet("srv", 0)
	zapper := nostr.Generate()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	s, err := zapsim.Start(zapsim.Options{Network: net, Zappers: map[string]nostr.SecretKey{"srv": zapper}, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pemCA, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCA) {
		t.Fatal("no certificate in the CA file")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer client.CloseIdleConnections()
	addr, err := zap.ParseAddress(s.Address("srv"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(u string) []byte {
		t.Helper()
		res, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return b
	}
	params, err := zap.ParsePayParams(get(addr.URL()))
	if err != nil || params.NostrPubkey != zapper.Public() {
		t.Fatalf("pay params: %+v %v", params, err)
	}
	zr := zap.NewRequest(5000, zapper.Public(), []string{"ws://127.0.0.1:1"}, nostr.Now())
	if err := zr.Sign(nostr.Generate()); err != nil {
		t.Fatal(err)
	}
	zrJSON, _ := json.Marshal(zr)
	callback := func(msat, nostrParam string) []byte {
		return get(params.Callback + "?" + url.Values{"amount": {msat}, "nostr": {nostrParam}}.Encode())
	}
	for name, c := range map[string][2]string{
		"another amount than the zap request's": {"6000", string(zrJSON)},
		"a zap request not signed":              {"5000", strings.Replace(string(zrJSON), `"sig":"`, `"sig":"00`, 1)},
		"no amount":                             {"", string(zrJSON)},
	} {
		if _, err := zap.ParseCallbackAnswer(callback(c[0], c[1])); err == nil {
			t.Errorf("%s: an invoice was made", name)
		}
	}
	pr, err := zap.ParseCallbackAnswer(callback("5000", string(zrJSON)))
	if err != nil || !strings.HasPrefix(pr, "lnbcrt50n1") {
		t.Fatalf("the zap's invoice: %q %v", pr, err)
	}
}
