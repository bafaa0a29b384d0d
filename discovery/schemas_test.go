package discovery_test

import (
	"errors"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
)

func TestCatalog_ResolveSchema(t *testing.T) {
	c := discovery.NewCatalog()
	addAll(t, c, announce(t, nostr.Generate(), 100, "Alpha", "1", false)...) // translate
	echo, echoHash, err := commonschema.Annotate([]byte(`{"name":"echo","inputSchema":{"type":"object"}}`))
	if err != nil {
		t.Fatal(err)
	}
	sk := nostr.Generate()
	addAll(t, c,
		sign(t, sk, contextvm.KindServerAnnouncement, 100, initContent("beta")),
		sign(t, sk, contextvm.KindToolsList, 100, `{"tools":[`+string(echo)+`]}`, nostr.Tag{"i", echoHash, "echo"}))
	_, translateHash := commonTranslate(t)
	common := 0 // how many leading digits the two hashes share
	for common < len(echoHash) && echoHash[common] == translateHash[common] {
		common++
	}

	for _, h := range []string{translateHash, echoHash} {
		for _, prefix := range []string{h, h[:common+1], h[:12]} {
			if got, err := c.ResolveSchema(prefix); err != nil || got != h {
				t.Errorf("ResolveSchema(%q) = %q, %v; want %s", prefix, got, err, h)
			}
		}
	}
	_, err = c.ResolveSchema(translateHash[:common])
	var amb *discovery.AmbiguousSchemaError
	if !errors.As(err, &amb) || len(amb.Candidates) != 2 || amb.Prefix != translateHash[:common] {
		t.Errorf("a shared prefix: %v", err)
	}
	other := "0"
	if translateHash[0] == '0' || echoHash[0] == '0' {
		other = "f"
		if translateHash[0] == 'f' || echoHash[0] == 'f' {
			other = "8"
		}
	}
	if _, err := c.ResolveSchema(other); !errors.Is(err, discovery.ErrNoSchema) {
		t.Errorf("a prefix nobody has: %v", err)
	}
}
