package nostrx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"fiatjaf.com/nostr/nip19"
)

// Vectors from NIP-19.
const (
	vecHex      = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
	vecNpub     = "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6"
	vecNprofile = "nprofile1qqsrhuxx8l9ex335q7he0f09aej04zpazpl0ne2cgukyawd24mayt8gpp4mhxue69uhhytnc9e3k7mgpz4mhxue69uhkg6nzv9ejuumpv34kytnrdaksjlyr9p"
	vecSecHex   = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
	vecNsec     = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
)

func TestParsePublicKey(t *testing.T) {
	want := nostr.MustPubKeyFromHex(vecHex)
	for _, in := range []string{vecHex, strings.ToUpper(vecHex), vecNpub, "nostr:" + vecNpub, "  " + vecNpub + "\n", vecNprofile} {
		pk, err := ParsePublicKey(in)
		if err != nil || pk.Key != want {
			t.Errorf("ParsePublicKey(%q) = %v, %v", in, pk.Key, err)
		}
	}
	pk, _ := ParsePublicKey(vecNprofile)
	if len(pk.Relays) != 2 || pk.Relays[0] != "wss://r.x.com" {
		t.Errorf("nprofile relays = %v", pk.Relays)
	}
}

func TestParsePublicKey_Errors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"abc", "64 hex"},
		{strings.Repeat("z", 64), "not a valid hex"},
		{vecNsec, "secret key"},
		{vecNpub[:len(vecNpub)-1] + "x", "bech32"},
		{"npub1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", "bech32"},
		{strings.Repeat("f", 64), "not a valid hex"}, // not on the curve
	} {
		_, err := ParsePublicKey(tc.in)
		if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePublicKey(%q) error = %v, want ErrInvalidKey mentioning %q", tc.in, err, tc.want)
		}
	}
}

func TestParseSecretKey(t *testing.T) {
	want := nostr.MustSecretKeyFromHex(vecSecHex)
	for _, in := range []string{vecSecHex, vecNsec, vecNsec + "\n"} {
		sk, err := ParseSecretKey(in)
		if err != nil || sk != want {
			t.Errorf("ParseSecretKey(%q): %v", in, err)
		}
	}
	for _, in := range []string{"", vecSecHex[:63], vecNpub, strings.Repeat("0", 64), strings.Repeat("g", 64), vecNsec[:20]} {
		_, err := ParseSecretKey(in)
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseSecretKey(%q) accepted", in)
		}
		if in != "" && len(in) > 8 && strings.Contains(err.Error(), in) {
			t.Errorf("error echoes the secret input: %v", err)
		}
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nested", "key")
	sk := nostr.Generate()
	if err := WriteKeyFile(path, sk, false); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	if d, _ := os.Stat(filepath.Dir(path)); d.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", d.Mode().Perm())
	}
	got, err := ReadKeyFile(path)
	if err != nil || got != sk {
		t.Fatalf("ReadKeyFile: %v", err)
	}
	if err := WriteKeyFile(path, nostr.Generate(), false); !errors.Is(err, ErrKeyFileExists) {
		t.Errorf("overwrite without force: %v", err)
	}
	fresh := nostr.Generate()
	if err := WriteKeyFile(path, fresh, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadKeyFile(path); got != fresh {
		t.Error("forced overwrite did not replace the key")
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("mode after overwrite %v", info.Mode().Perm())
	}

	for _, mode := range []os.FileMode{0o640, 0o604, 0o644} {
		os.Chmod(path, mode)
		_, err := ReadKeyFile(path)
		if !errors.Is(err, ErrInsecureKeyFile) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %o: %v", mode, err)
		}
	}
	os.Chmod(path, 0o400)
	if _, err := ReadKeyFile(path); err != nil {
		t.Errorf("read-only owner file refused: %v", err)
	}
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	first, created, err := LoadOrCreateKeyFile(path)
	if err != nil || !created {
		t.Fatalf("first: created=%v %v", created, err)
	}
	second, created, err := LoadOrCreateKeyFile(path)
	if err != nil || created || second != first {
		t.Fatalf("second: created=%v %v", created, err)
	}
}

func TestHexKeyInFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	os.WriteFile(path, []byte(vecSecHex+"\n"), 0o600)
	if sk, err := ReadKeyFile(path); err != nil || sk.Hex() != vecSecHex {
		t.Fatalf("hex key file: %v", err)
	}
}

func FuzzParsePublicKey(f *testing.F) {
	for _, s := range []string{vecHex, vecNpub, vecNprofile, vecNsec, "", "nprofile1", "npub1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pk, err := ParsePublicKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error not wrapping ErrInvalidKey: %v", err)
			}
			return
		}
		// Whatever parses must round-trip through npub.
		again, err := ParsePublicKey(nip19.EncodeNpub(pk.Key))
		if err != nil || again.Key != pk.Key {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzParseSecretKey(f *testing.F) {
	for _, s := range []string{vecSecHex, vecNsec, "", "nsec1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sk, err := ParseSecretKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error not wrapping ErrInvalidKey: %v", err)
			}
			return
		}
		if sk.Public() == nostr.ZeroPK {
			t.Fatal("accepted a key without a public key")
		}
	})
}
