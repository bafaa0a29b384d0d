package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// testUpstream is this test binary, which serves as an upstream when
// the environment says so (see upstreamchild_test.go).
func testUpstream(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// withSecrets is a copy of c with both secret variables set, and the
// upstream told to append its environment to the file returned.
func withSecrets(t *testing.T, c *cli) (*cli, string) {
	t.Helper()
	dir := t.TempDir()
	s := &cli{t: t, cfg: c.cfg, env: maps.Clone(c.env)}
	s.env[secretenv.SecretKey] = nostrx.EncodeNsec(nostr.Generate())
	s.env[secretenv.Wallet] = "fake://srv?ledger=" + filepath.Join(dir, "ledger")
	s.env[envDumpEnv] = filepath.Join(dir, "env")
	s.env[execLogEnv] = os.DevNull
	return s, s.env[envDumpEnv]
}

// checkChildEnv reads the environments the upstreams appended to dump
// (at least want of them) and checks that each lacks the secret variables
// not passed, has those passed with the value cvm had, and has the rest.
func checkChildEnv(t *testing.T, c *cli, dump string, want int, passed ...string) {
	t.Helper()
	f, err := os.Open(dump)
	if err != nil {
		t.Fatalf("no upstream wrote its environment: %v", err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var environ []string
		if err := json.Unmarshal(sc.Bytes(), &environ); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(environ, envDumpEnv+"="+dump) {
			t.Errorf("upstream %d lacks the variables that are no secret: %q", n, environ)
		}
		for _, name := range secretenv.Names() {
			has := slices.Contains(environ, name+"="+c.env[name])
			if want := slices.Contains(passed, name); has != want {
				t.Errorf("upstream %d: has $%s: %v, want %v (passed: %v)", n, name, has, want, passed)
			}
		}
	}
	if n < want {
		t.Fatalf("%d upstreams wrote their environment, want at least %d", n, want)
	}
}

// An operator's key and wallet, given to cvm in its environment, reach
// no upstream unless named with --pass-env: not the first one started to
// check the command, not the per-client or shared sessions'.
func TestGatewayCommand_UpstreamGetsNoSecrets(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	for _, tc := range []struct {
		name, mode string
		pass       []string
	}{
		{"per-client", "per-client", nil},
		{"shared", "shared", nil},
		{"pass-env", "per-client", []string{secretenv.Wallet}},
		{"pass-env both", "shared", []string{secretenv.Wallet, secretenv.SecretKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dump := withSecrets(t, newCLI(t))
			args := []string{"gateway", "--relay", r.URL, "--session-mode", tc.mode}
			for _, name := range tc.pass {
				args = append(args, "--pass-env", name)
			}
			p := startCVM(t, c, append(args, "--", testUpstream(t))...)
			var ready gatewayReady
			p.ReadyLine(t, &ready)
			// The gateway did take them: the key is its identity.
			if sk, _ := nostrx.ParseSecretKey(c.env[secretenv.SecretKey]); ready.Pubkey != sk.Public().Hex() {
				t.Fatalf("the gateway serves as %s, not as the key of $%s", ready.Pubkey, secretenv.SecretKey)
			}
			if code, out, errOut := c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", r.URL); code != 0 || out != `{"sum":3}`+"\n" {
				t.Fatalf("call: %d %q %q", code, out, errOut)
			}
			if code := p.Stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit %d; stderr: %s", code, p.Stderr)
			}
			// The check's upstream, and the session's (per-client) or
			// the shared one.
			checkChildEnv(t, c, dump, 2, tc.pass...)
		})
	}
}

func TestRoomBridge_ServerGetsNoSecrets(t *testing.T) {
	c := newCLI(t)
	data, ready := startRoomGateway(t, c)
	for _, tc := range []struct {
		id   string
		pass []string
	}{
		{"alpha", nil},
		{"beta", []string{secretenv.SecretKey}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			bc, dump := withSecrets(t, c)
			args := []string{"room", "bridge", "--gateway", ready.REST, "--topic", "room:x",
				"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", tc.id)}
			for _, name := range tc.pass {
				args = append(args, "--pass-env", name)
			}
			bridge := startCVM(t, bc, append(args, "--", testUpstream(t))...)
			var bready struct{ Ready bool }
			bridge.ReadyLine(t, &bready)
			if code := bridge.Stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("bridge exited %d; stderr: %s", code, bridge.Stderr)
			}
			checkChildEnv(t, bc, dump, 1, tc.pass...)
		})
	}
}

func TestPassEnv_BadInput(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{
		{"gateway", "--pass-env", "CVM_WALET", "--", "true"},
		{"gateway", "--pass-env", "PATH", "--", "true"},
		{"room", "bridge", "--topic", "room:x", "--token", "a", "--pass-env", "HOME", "--", "true"},
	} {
		code, out, errOut := c.run(args...)
		if code != exitLocal || out != "" || !strings.Contains(errOut, "--pass-env") || !strings.Contains(errOut, secretenv.SecretKey+" and "+secretenv.Wallet) {
			t.Errorf("%v: code %d, %q, %q; want 2 and the secret variables named", args, code, out, errOut)
		}
	}
	code, _, errOut := c.run("gateway", "--pass-env", secretenv.Wallet, "--upstream-url", "http://127.0.0.1:1/mcp")
	if code != exitLocal || !strings.Contains(errOut, "--pass-env is for an upstream command") {
		t.Errorf("--pass-env with --upstream-url: %d %q", code, errOut)
	}
}

// The test upstream of these tests is a wrapper whose child serves on the
// wrapper's pipes, outlives its input and ignores SIGTERM (see forkEnv), as
// npx and the node it starts. However the gateway ends, and when the
// wrapper dies under it, nothing of it is left running.
func TestGatewayCommand_StopsUpstreamProcessGroup(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	for _, tc := range []struct {
		sig  os.Signal
		mode string
	}{
		{syscall.SIGTERM, "shared"},
		{os.Interrupt, "per-client"},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			c := newCLI(t)
			dir := forkDir(t)
			c.env[forkEnv] = dir
			p := startCVM(t, c, "gateway", "--relay", r.URL, "--session-mode", tc.mode, "--", testUpstream(t))
			var ready gatewayReady
			p.ReadyLine(t, &ready)
			if tc.mode == "per-client" {
				if code, out, errOut := c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", r.URL); code != 0 || out != `{"sum":3}`+"\n" {
					t.Fatalf("call: %d %q %q", code, out, errOut)
				}
			}
			// The check's upstream is gone; the shared one, or the
			// client session's, runs.
			if gs := grandchildren(t, dir); len(gs) != 2 || len(living(t, gs)) != 1 {
				t.Fatalf("grandchildren %v, alive %v; want the check's gone and one alive", gs, living(t, gs))
			}
			if code := p.Stop(t, tc.sig); code != 0 {
				t.Fatalf("exit %d after %v; stderr: %s", code, tc.sig, p.Stderr)
			}
			awaitNoneAlive(t, dir, "after the gateway stopped")
		})
	}

	t.Run("refused start", func(t *testing.T) {
		c := newCLI(t)
		first := startCVM(t, c, "gateway", "--relay", r.URL, "--", demoServer(t))
		var ready gatewayReady
		first.ReadyLine(t, &ready)
		// The same key and data directory: refused.
		dir := forkDir(t)
		second := &cli{t: t, cfg: c.cfg, env: maps.Clone(c.env)}
		second.env[forkEnv] = dir
		p := startCVM(t, second, "gateway", "--relay", r.URL, "--", testUpstream(t))
		if code := p.Wait(t); code != exitLocal || !strings.Contains(p.Stderr.String(), "another cvm gateway with this key already runs") {
			t.Fatalf("second gateway: exit %d, stderr %s", code, p.Stderr)
		}
		if gs := grandchildren(t, dir); len(gs) != 0 {
			t.Fatalf("a refused gateway started its upstream: grandchildren %v, alive %v", gs, living(t, gs))
		}
	})

	t.Run("restart", func(t *testing.T) {
		c := newCLI(t)
		dir := forkDir(t)
		c.env[forkEnv] = dir
		p := startCVM(t, c, "gateway", "--relay", r.URL, "--session-mode", "shared", "--", testUpstream(t))
		var ready gatewayReady
		p.ReadyLine(t, &ready)
		up := living(t, grandchildren(t, dir))
		if len(up) != 1 {
			t.Fatalf("alive %v, want the shared upstream's", up)
		}
		// The wrapper dies, as npx killed: its child goes with it, and the
		// upstream is started again.
		if err := syscall.Kill(up[0].ppid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		awaitGrandchildren(t, dir, "after the upstream died", func(gs []grandchild) bool {
			alive := living(t, gs)
			return len(alive) == 1 && alive[0].pid != up[0].pid
		})
		if code, out, errOut := c.run("call", ready.Npub, "add", "a=1", "b=2", "--relay", r.URL); code != 0 || out != `{"sum":3}`+"\n" {
			t.Fatalf("call after the restart: %d %q %q", code, out, errOut)
		}
		if code := p.Stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit %d; stderr: %s", code, p.Stderr)
		}
		awaitNoneAlive(t, dir, "after the gateway stopped")
	})
}

func TestRoomBridge_StopsServerProcessGroup(t *testing.T) {
	c := newCLI(t)
	data, ready := startRoomGateway(t, c)
	dir := forkDir(t)
	bc := &cli{t: t, cfg: c.cfg, env: maps.Clone(c.env)}
	bc.env[forkEnv] = dir
	bridge := startCVM(t, bc, "room", "bridge", "--gateway", ready.REST, "--topic", "room:x",
		"--token", mint(t, c, "--data", data, "--topic", "room:x", "--id", "alpha"), "--", testUpstream(t))
	var bready struct{ Ready bool }
	bridge.ReadyLine(t, &bready)
	if alive := living(t, grandchildren(t, dir)); len(alive) != 1 {
		t.Fatalf("alive %v, want the server", alive)
	}
	if code := bridge.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("bridge exited %d; stderr: %s", code, bridge.Stderr)
	}
	awaitNoneAlive(t, dir, "after the bridge stopped")
}
