package secretenv

import (
	"slices"
	"strings"
	"testing"
)

func TestStrip_DropsSecretsUnlessPassed(t *testing.T) {
	environ := []string{"PATH=/bin", SecretKey + "=nsec1x", "HOME=/h", Wallet + "=nostr+walletconnect://x?secret=y", "CVM_WALLETS=not-a-secret", "=C:=odd"}
	for _, tc := range []struct {
		pass []string
		want []string
	}{
		{nil, []string{"PATH=/bin", "HOME=/h", "CVM_WALLETS=not-a-secret", "=C:=odd"}},
		{[]string{Wallet}, []string{"PATH=/bin", "HOME=/h", Wallet + "=nostr+walletconnect://x?secret=y", "CVM_WALLETS=not-a-secret", "=C:=odd"}},
		{[]string{Wallet, SecretKey}, environ},
	} {
		if got := Strip(environ, tc.pass); !slices.Equal(got, tc.want) {
			t.Errorf("Strip(pass %v) = %q, want %q", tc.pass, got, tc.want)
		}
	}
	if environ[1] != SecretKey+"=nsec1x" {
		t.Error("Strip modified its input")
	}
}

func TestCheckPass_RefusesNamesThatAreNotSecrets(t *testing.T) {
	if err := CheckPass([]string{SecretKey, Wallet}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"PATH", "CVM_WALET", ""} {
		err := CheckPass([]string{Wallet, name})
		if err == nil || !strings.Contains(err.Error(), SecretKey) || !strings.Contains(err.Error(), Wallet) {
			t.Errorf("CheckPass(%q) = %v, want an error naming the secret variables", name, err)
		}
	}
}

func TestNames_IsACopy(t *testing.T) {
	n := Names()
	n[0] = "PATH"
	if IsSecret("PATH") || !IsSecret(SecretKey) {
		t.Fatal("Names shares its backing array")
	}
}
