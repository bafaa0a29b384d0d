package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/cvmgo/cvm/outbound"
	"github.com/cvmgo/cvm/outbound/outboundtest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/secp"
	"github.com/cvmgo/cvm/nostrx"
)

// cli runs cvm in-process with its own config and data directories.
type cli struct {
	t   testing.TB
	env map[string]string

	cfg string // config directory
}

func newCLI(t testing.TB) *cli {
	home := t.TempDir()
	c := &cli{t: t, env: map[string]string{
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
		"XDG_CACHE_HOME":  filepath.Join(home, "cache"),
		"HOME":            home,
	}}
	c.cfg = filepath.Join(home, "config", "cvm")
	return c
}

// environ is the whole environment of a cvm process c starts: PATH and
// c's variables, nothing else of the test's.
func (c *cli) environ() []string {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range c.env {
		env = append(env, k+"="+v)
	}
	return env
}

func (c *cli) run(args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	// stderr takes the logger's lines and the command's own, which may
	// come from several goroutines (progress, payments).
	var out bytes.Buffer
	var errb syncBuffer
	code = run(context.Background(), args, env{
		stdin:   strings.NewReader(""),
		stdout:  &out,
		stderr:  &errb,
		getenv:  func(k string) string { return c.env[k] },
		fetcher: c.fetcher(),
	})
	return code, out.String(), errb.String()
}

// fetcher is the outbound fetcher of an in-process run: the test binary
// is not built with tag cvmtest, so the loopback servers a test names in
// outboundtest's variables (as it does for the cvm binary) are trusted
// here; nil without them.
func (c *cli) fetcher() *outbound.Fetcher {
	getenv := func(k string) string { return c.env[k] }
	if getenv(outboundtest.EnvAllow) == "" && getenv(outboundtest.EnvCA) == "" {
		return nil
	}
	opts, err := outboundtest.FromEnv(outbound.Options{}, getenv)
	if err != nil {
		c.t.Fatal(err)
	}
	return outbound.New(opts)
}

func (c *cli) writeConfig(body string) {
	c.t.Helper()
	if err := os.MkdirAll(c.cfg, 0o700); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.cfg, "config.toml"), []byte(body), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

func TestVersion(t *testing.T) {
	c := newCLI(t)
	code, out, _ := c.run("version")
	if code != 0 || !strings.HasPrefix(out, "cvm ") || !strings.Contains(out, "crypto "+secp.Backend) {
		t.Fatalf("version: code %d, out %q (want the crypto backend %s named)", code, out, secp.Backend)
	}
	code, out, _ = c.run("version", "--json")
	var v versionInfo
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version == "" || v.Go == "" || v.Crypto != secp.Backend {
		t.Fatalf("version --json: code %d, out %q", code, out)
	}
}

func TestUsageErrorExits2(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{{"version", "--bogus"}, {"nosuchcommand"}, {"version", "extra"}} {
		code, out, errOut := c.run(args...)
		if code != exitLocal || out != "" || !strings.HasPrefix(errOut, "cvm: ") {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 2, nothing on stdout, an error on stderr", args, code, out, errOut)
		}
	}
}

func TestKeygen(t *testing.T) {
	c := newCLI(t)
	code, out, errOut := c.run("keygen", "--json")
	if code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	var res struct{ Npub, Pubkey, Path string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Path != filepath.Join(c.cfg, "key") {
		t.Errorf("default path %s, want key in the config directory", res.Path)
	}
	info, err := os.Stat(res.Path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v mode %v, want 0600", err, info.Mode())
	}
	sk, err := nostrx.ReadKeyFile(res.Path)
	if err != nil || sk.Public().Hex() != res.Pubkey || nostrx.EncodeNpub(sk.Public()) != res.Npub {
		t.Fatalf("printed keys do not match the file: %v", err)
	}
	data, _ := os.ReadFile(res.Path)
	if strings.Contains(out, strings.TrimSpace(string(data))) || strings.Contains(out, sk.Hex()) {
		t.Fatal("keygen printed the secret key")
	}

	code, _, errOut = c.run("keygen")
	if code != exitLocal || !strings.Contains(errOut, "--force") {
		t.Fatalf("keygen over an existing key: code %d, stderr %q; want 2 and a hint about --force", code, errOut)
	}
	if again, _ := nostrx.ReadKeyFile(res.Path); again != sk {
		t.Fatal("the existing key was overwritten without --force")
	}
	if code, _, _ = c.run("keygen", "--force"); code != 0 {
		t.Fatal("keygen --force failed")
	}
	if again, _ := nostrx.ReadKeyFile(res.Path); again == sk {
		t.Fatal("--force did not replace the key")
	}

	other := filepath.Join(t.TempDir(), "sub", "k")
	code, out, _ = c.run("keygen", "--out", other)
	if code != 0 || !strings.Contains(out, "npub1") {
		t.Fatalf("keygen --out: code %d out %q", code, out)
	}
}

func TestIdentityPrecedence(t *testing.T) {
	c := newCLI(t)
	write := func(name string) (string, nostr.SecretKey) {
		sk := nostr.Generate()
		p := filepath.Join(t.TempDir(), name)
		if err := nostrx.WriteKeyFile(p, sk, false); err != nil {
			t.Fatal(err)
		}
		return p, sk
	}
	whoami := func(args ...string) (string, string) {
		t.Helper()
		code, out, errOut := c.run(append([]string{"whoami", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("whoami %v: %d %s", args, code, errOut)
		}
		var res struct{ Pubkey, Source string }
		json.Unmarshal([]byte(out), &res)
		return res.Pubkey, res.Source
	}

	// Nothing configured: whoami needs an existing key and says how to get one.
	if code, _, errOut := c.run("whoami"); code != exitLocal || !strings.Contains(errOut, "cvm keygen") {
		t.Fatalf("no key: code %d, %q", code, errOut)
	}

	defPath := filepath.Join(c.cfg, "key")
	defKey := nostr.Generate()
	nostrx.WriteKeyFile(defPath, defKey, false)
	if pk, src := whoami(); pk != defKey.Public().Hex() || !strings.HasPrefix(src, "default key") {
		t.Errorf("default key: %s from %s", pk, src)
	}

	cfgPath, cfgKey := write("cfgkey")
	c.writeConfig("key = " + quote(cfgPath) + "\n")
	if pk, src := whoami(); pk != cfgKey.Public().Hex() || !strings.HasPrefix(src, "config key") {
		t.Errorf("config key: %s from %s", pk, src)
	}

	envKey := nostr.Generate()
	c.env["CVM_SECRET_KEY"] = nostrx.EncodeNsec(envKey)
	if pk, src := whoami(); pk != envKey.Public().Hex() || src != "$CVM_SECRET_KEY" {
		t.Errorf("env key: %s from %s", pk, src)
	}
	c.env["CVM_SECRET_KEY"] = envKey.Hex() // hex works as well
	if pk, _ := whoami(); pk != envKey.Public().Hex() {
		t.Errorf("hex env key: %s", pk)
	}

	flagPath, flagKey := write("flagkey")
	if pk, src := whoami("--key", flagPath); pk != flagKey.Public().Hex() || src != "--key "+flagPath {
		t.Errorf("--key: %s from %s", pk, src)
	}

	c.env["CVM_SECRET_KEY"] = "not a key"
	code, _, errOut := c.run("whoami")
	if code != exitLocal || !strings.Contains(errOut, "CVM_SECRET_KEY") || strings.Contains(errOut, "not a key") {
		t.Errorf("bad env key: code %d, %q (must name the variable, not echo the value)", code, errOut)
	}
}

func TestInsecureKeyFileRefused(t *testing.T) {
	c := newCLI(t)
	p := filepath.Join(t.TempDir(), "key")
	nostrx.WriteKeyFile(p, nostr.Generate(), false)
	os.Chmod(p, 0o644)
	code, _, errOut := c.run("whoami", "--key", p)
	if code != exitLocal || !strings.Contains(errOut, "chmod 600 "+p) {
		t.Fatalf("code %d, stderr %q; want 2 and the chmod fix", code, errOut)
	}
}

func TestServerCreatesDefaultKeyOnce(t *testing.T) {
	c := newCLI(t)
	c.run("version")
	if _, err := os.Stat(filepath.Join(c.cfg, "key")); err == nil {
		t.Fatal("a command that needs no identity created a key")
	}
	a := &app{env: env{getenv: func(k string) string { return c.env[k] }}, log: discardLogger()}

	// A one-shot client without any key gets a throwaway and writes nothing.
	client, err := a.resolveIdentity("", clientKey)
	if err != nil || client.origin != "throwaway" {
		t.Fatalf("client: %+v %v", client.origin, err)
	}
	if _, err := os.Stat(filepath.Join(c.cfg, "key")); err == nil {
		t.Fatal("a client created a key file")
	}

	// A server creates the default key once and keeps it.
	first, err := a.resolveIdentity("", serverKey)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(c.cfg, "key")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("server key file: %v", err)
	}
	second, err := a.resolveIdentity("", serverKey)
	if err != nil || second.secret != first.secret {
		t.Fatalf("second run got another identity: %v", err)
	}
	if again, _ := a.resolveIdentity("", clientKey); again.secret != first.secret {
		t.Fatal("a client did not use the existing default key")
	}
}

func TestConfigPrecedence(t *testing.T) {
	c := newCLI(t)
	listen := func(args ...string) (string, string) {
		t.Helper()
		code, out, errOut := c.run(append([]string{"config", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("config: %d %s", code, errOut)
		}
		var res struct {
			Settings []struct{ Key, Value, Source string }
		}
		json.Unmarshal([]byte(out), &res)
		for _, s := range res.Settings {
			if s.Key == "relay.listen" {
				return s.Value, s.Source
			}
		}
		t.Fatal("relay.listen missing")
		return "", ""
	}
	if v, src := listen(); v != "127.0.0.1:7777" || src != "default" {
		t.Errorf("default: %s %s", v, src)
	}
	c.writeConfig("[relay]\nlisten = \"127.0.0.1:1111\"\n")
	if v, src := listen(); v != "127.0.0.1:1111" || src != "file" {
		t.Errorf("file: %s %s", v, src)
	}
	c.env["CVM_RELAY_LISTEN"] = "127.0.0.1:2222"
	if v, src := listen(); v != "127.0.0.1:2222" || src != "env" {
		t.Errorf("env: %s %s", v, src)
	}

	// The flag layer, seen through a command that reads the value.
	c.writeConfig("log-level = \"bogus\"\n")
	if code, _, errOut := c.run("version"); code != exitLocal || !strings.Contains(errOut, "log-level") {
		t.Errorf("bad value from the file: code %d %q", code, errOut)
	}
	if code, _, _ := c.run("version", "--log-level", "debug"); code != 0 {
		t.Errorf("the flag did not override the file")
	}

	c.writeConfig("[relay\nbroken")
	if code, _, errOut := c.run("version"); code != exitLocal || !strings.Contains(errOut, "config.toml") {
		t.Errorf("broken file: code %d %q", code, errOut)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
