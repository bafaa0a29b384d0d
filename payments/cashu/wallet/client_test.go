package wallet

import (
	"errors"
	"testing"
)

func TestNormalizeMintURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://Mint.Example.com/":       "https://mint.example.com",
		"https://mint.example.com/cashu/": "https://mint.example.com/cashu",
		"http://127.0.0.1:3338":           "http://127.0.0.1:3338",
		"http://localhost:3338/":          "http://localhost:3338",
		"http://[::1]:3338":               "http://[::1]:3338",
	} {
		if got, err := NormalizeMintURL(in); err != nil || got != want {
			t.Errorf("NormalizeMintURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{
		"http://mint.example.com", // plain http off loopback
		"http://192.0.2.1:3338",
		"ftp://mint.example.com",
		"https://user:pw@mint.example.com",
		"https://mint.example.com/?q=1",
		"mint.example.com",
		"",
	} {
		if got, err := NormalizeMintURL(bad); !errors.Is(err, ErrMintURL) {
			t.Errorf("NormalizeMintURL(%q) = %q, %v; want ErrMintURL", bad, got, err)
		}
	}
}

// FuzzNormalizeMintURL: a token's mint URL is untrusted; whatever it is,
// the result is refused or is its own normal form.
func FuzzNormalizeMintURL(f *testing.F) {
	for _, s := range []string{"https://mint.example.com/", "http://127.0.0.1:3338", "http://[::1]:1/a/", "https://a/%2F/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := NormalizeMintURL(s)
		if err != nil {
			return
		}
		again, err := NormalizeMintURL(u)
		if err != nil || again != u {
			t.Fatalf("%q normalizes to %q, which normalizes to %q, %v", s, u, again, err)
		}
	})
}
