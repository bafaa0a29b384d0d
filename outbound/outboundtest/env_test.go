package outboundtest_test

import (
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
)

// FromEnv lets through exactly the addresses named and trusts exactly the
// certificates in the file; anything it cannot read is an error naming
// the variable, never a wider opening.
func TestFromEnv(t *testing.T) {
	srv := httptest.NewTLSServer(nil)
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(allow, ca string) func(string) string {
		return func(k string) string {
			return map[string]string{outboundtest.EnvAllow: allow, outboundtest.EnvCA: ca}[k]
		}
	}
	opts, err := outboundtest.FromEnv(outbound.Options{}, env("", ""))
	if err != nil || len(opts.Allow) != 0 || len(opts.ExtraRoots) != 0 {
		t.Errorf("unset: %+v %v", opts, err)
	}
	host := srv.Listener.Addr().String()
	opts, err = outboundtest.FromEnv(outbound.Options{}, env(host+", 127.0.0.1:9", ca))
	if err != nil || len(opts.Allow) != 2 || opts.Allow[0] != netip.MustParseAddrPort(host) || len(opts.ExtraRoots) != 1 {
		t.Fatalf("set: %+v %v", opts, err)
	}
	// Reached and trusted: it answers 404, its handler being nil.
	if _, err := outbound.New(opts).Get(t.Context(), outbound.Request{URL: srv.URL}); !errors.Is(err, outbound.ErrStatus) {
		t.Errorf("the allowed, trusted server: %v", err)
	}
	for name, getenv := range map[string]func(string) string{
		"an address without a port": env("127.0.0.1", ""),
		"a host name":               env("localhost:80", ""),
		"no CA file":                env("", filepath.Join(dir, "none.pem")),
		"a CA file without PEM":     env("", junk),
	} {
		if _, err := outboundtest.FromEnv(outbound.Options{}, getenv); err == nil || !strings.Contains(err.Error(), "CVM_TEST_OUTBOUND_") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
