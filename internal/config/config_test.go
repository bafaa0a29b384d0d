package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func flags() (*pflag.FlagSet, *[]string, *time.Duration, *bool, *string) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	relays := fs.StringSlice("relay", nil, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	verbose := fs.Bool("verbose", false, "")
	listen := fs.String("listen", "127.0.0.1:1", "")
	Bind(fs, "relay", "relays")
	Bind(fs, "timeout", "timeout")
	Bind(fs, "verbose", "call.verbose")
	Bind(fs, "listen", "relay.listen")
	return fs, relays, timeout, verbose, listen
}

func load(t *testing.T, body string) *FileValues {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(p, []byte(body), 0o600)
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestApply_Layers(t *testing.T) {
	file := load(t, `
relays = ["wss://a", "wss://b"]
timeout = "5s"
[call]
verbose = true
[relay]
listen = "127.0.0.1:2"
[servers]
weather = "npub1xyz"
`)
	env := map[string]string{"CVM_TIMEOUT": "7s"}
	fs, relays, timeout, verbose, listen := flags()
	fs.Parse([]string{"--listen", "127.0.0.1:3"})
	settings, err := Apply(fs, file, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*relays, []string{"wss://a", "wss://b"}) || *timeout != 7*time.Second || !*verbose || *listen != "127.0.0.1:3" {
		t.Fatalf("relays=%v timeout=%v verbose=%v listen=%v", *relays, *timeout, *verbose, *listen)
	}
	want := map[string]Source{"relays": File, "timeout": Env, "call.verbose": File, "relay.listen": Flag}
	for _, s := range settings {
		if want[s.Key] != s.Source {
			t.Errorf("%s: source %s, want %s", s.Key, s.Source, want[s.Key])
		}
	}
	if got := file.Table("servers"); got["weather"] != "npub1xyz" {
		t.Errorf("servers table = %v", got)
	}
}

func TestApply_EnvListIsCommaSeparated(t *testing.T) {
	fs, relays, _, _, _ := flags()
	_, err := Apply(fs, load(t, ""), func(k string) string {
		if k == "CVM_RELAYS" {
			return "wss://x, wss://y"
		}
		return ""
	})
	if err != nil || !slices.Equal(*relays, []string{"wss://x", "wss://y"}) {
		t.Fatalf("%v %v", *relays, err)
	}
}

func TestApply_BadValuesNameTheirOrigin(t *testing.T) {
	fs, _, _, _, _ := flags()
	file := load(t, "timeout = \"soon\"\n")
	_, err := Apply(fs, file, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), file.Path) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("file error = %v", err)
	}
	fs, _, _, _, _ = flags()
	_, err = Apply(fs, load(t, ""), func(k string) string {
		if k == "CVM_CALL_VERBOSE" {
			return "maybe"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "CVM_CALL_VERBOSE") {
		t.Fatalf("env error = %v", err)
	}
}

func TestLoad_MissingFileIsEmpty(t *testing.T) {
	f, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if err != nil || len(f.Keys()) != 0 {
		t.Fatalf("%v %v", f, err)
	}
}

func TestLoad_SyntaxErrorNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(p, []byte("[broken"), 0o600)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v", err)
	}
}

func TestDirs(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	get := func(k string) string { return env[k] }
	if d, _ := Dir(get); !strings.HasSuffix(d, "cvm") || !strings.HasPrefix(d, "/home/u") {
		t.Errorf("Dir = %s", d)
	}
	env["XDG_CONFIG_HOME"] = "/x"
	if d, _ := Dir(get); d != "/x/cvm" {
		t.Errorf("Dir with XDG = %s", d)
	}
	if _, err := DataDir(func(string) string { return "" }); err == nil {
		t.Error("DataDir without HOME or XDG_DATA_HOME succeeded")
	}
}
