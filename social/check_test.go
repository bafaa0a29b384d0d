package social

import (
	"net/url"
	"strings"
	"testing"
)

func TestProfileCheck(t *testing.T) {
	if err := (Profile{Name: "n", Picture: "https://p.example/x.png", Website: "http://w.example", NIP05: "a@b.example", LUD16: "a@b.example"}).Check(); err != nil {
		t.Fatalf("a good profile: %v", err)
	}
	for _, p := range []Profile{
		{Picture: "javascript:alert(1)"}, {Website: "ftp://x"}, {Banner: "https://"}, {NIP05: "nobody"}, {LUD16: "a@b/c"},
		{Name: strings.Repeat("x", maxProfileLine+1)}, {About: strings.Repeat("x", maxProfileAbout+1)}, {About: "\xff"},
	} {
		if err := p.Check(); err == nil {
			t.Errorf("%+v passed", p)
		}
	}
}

func FuzzSplitAddress(f *testing.F) {
	for _, s := range []string{"bob@example.com", "_@127.0.0.1:8443", "a@b@c", "@x", "x@", "B.o-b_@EXAMPLE.com", "a@[::1]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, domain, err := SplitAddress(s)
		if err != nil {
			return
		}
		if name == "" || domain == "" || strings.ContainsAny(domain, "@/?#") || strings.ToLower(name) != name {
			t.Fatalf("%q split into %q, %q", s, name, domain)
		}
		if u, err := url.Parse("https://" + domain + "/.well-known/nostr.json"); err != nil || u.Host != domain {
			t.Fatalf("%q: the document's URL names another host: %v", s, err)
		}
	})
}
