package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// A cvm server whose encryption changes between runs (same key, served
// again): each run after a change still succeeds, the server's refusal
// (-32010, -32011) making the client send the call again in the other form
// at once; stderr says so and that the cache was corrected; and the run
// after goes the right way in one event.
func TestOneShot_ServerChangesEncryptionBetweenRuns(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	key := contextvm.NewKeySigner(nostr.Generate())
	c := newCLI(t)
	var srv *contextvm.Server
	for i, stage := range []struct {
		enc     contextvm.EncryptionMode
		said    string // what the first run after the change says
		changed bool   // and whether it says the cache was corrected
	}{
		{contextvm.EncryptOptional, "", false}, // first contact
		{contextvm.EncryptDisabled, "the server has encryption disabled: sending the request again in plaintext", true},
		{contextvm.EncryptRequired, "the server requires encryption: sending the request again gift-wrapped", true},
		{contextvm.EncryptDisabled, "the server has encryption disabled: sending the request again in plaintext", true},
		// Sent in plaintext, as remembered, and answered with the tags of
		// a server that now reads gift wraps.
		{contextvm.EncryptOptional, "", true},
	} {
		if srv != nil {
			srv.Close()
		}
		srv = serveDemo(t, contextvm.ServerOptions{Relays: []string{r.URL}, Signer: key, Encryption: stage.enc}, nil)
		npub := nostrx.EncodeNpub(srv.PublicKey())
		in := watchInbox(t, r.URL, srv.PublicKey())
		code, out, errOut := c.run("call", npub, "add", "a=2", "b=3", "--relay", r.URL, "--timeout", "10s")
		if code != 0 || !strings.Contains(out, `{"sum":5}`) {
			t.Fatalf("stage %d (%s): code %d, stdout %q, stderr %q", i, stage.enc, code, out, errOut)
		}
		if !strings.Contains(errOut, stage.said) || strings.Contains(errOut, "changed its encryption") != stage.changed {
			t.Errorf("stage %d (%s): stderr %q; want %q, and the cache corrected: %v", i, stage.enc, errOut, stage.said, stage.changed)
		}
		in.Take()
		if code, out, errOut := c.run("call", npub, "add", "a=2", "b=3", "--relay", r.URL, "--timeout", "10s"); code != 0 || !strings.Contains(out, `{"sum":5}`) || errOut != "" {
			t.Fatalf("stage %d (%s), again: code %d, stdout %q, stderr %q", i, stage.enc, code, out, errOut)
		}
		if n := len(in.Take()); n != 1 {
			t.Errorf("stage %d (%s), again: %d events to the server; want 1", i, stage.enc, n)
		}
	}
}

// A gateway whose upstream starts slowly (seconds before it answers its
// first request, as an npx package fetched on first use) is known to read
// gift wraps, from its announcement or from the cache: the client waits
// for it, and never sends it a request again in plaintext (pings aside),
// nor says it is trying plaintext. Each run is a new client key, so a new
// session of the gateway, so a cold upstream.
func TestOneShot_SlowUpstreamKnownToReadGiftWraps(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gateway := func(t *testing.T, extra ...string) (nostr.PubKey, string) {
		t.Helper()
		logPath := filepath.Join(t.TempDir(), "exec.log")
		args := append([]string{"gateway", "--relay", r.URL, "-e", execLogEnv + "=" + logPath, "-e", execStartDelayEnv + "=4s"}, extra...)
		p := startCVM(t, newCLI(t), append(args, "--", exe)...)
		var ready struct{ Pubkey string }
		p.ReadyLine(t, &ready)
		pk, err := nostr.PubKeyFromHex(ready.Pubkey)
		if err != nil {
			t.Fatal(err)
		}
		return pk, logPath
	}
	run := func(t *testing.T, c *cli, in *relaytest.Inbox, args ...string) {
		t.Helper()
		code, out, errOut := c.run(append(args, "--relay", r.URL)...)
		if code != 0 || out == "" {
			t.Fatalf("%v: code %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if strings.Contains(errOut, "plaintext") {
			t.Errorf("%v: stderr %q", args, errOut)
		}
		for _, e := range in.Take() {
			var msg struct{ Method string }
			if e.Kind == contextvm.KindMessage && (json.Unmarshal([]byte(e.Content), &msg) != nil || msg.Method != "ping") {
				t.Errorf("%v: a request went in plaintext: %s", args, e.Content)
			}
		}
	}

	t.Run("announced", func(t *testing.T) {
		pk, logPath := gateway(t, "--announce")
		waitForEvent(t, r.URL, nostr.Filter{Authors: []nostr.PubKey{pk}, Kinds: []nostr.Kind{contextvm.KindServerAnnouncement}})
		in := watchInbox(t, r.URL, pk)
		npub := nostrx.EncodeNpub(pk)
		for _, args := range [][]string{{"tools", npub}, {"call", npub, "add", "a=1", "b=2"}, {"call", npub, "add", "a=1", "b=2", "--stateful"}} {
			run(t, newCLI(t), in, args...) // a fresh cache: the announcement says
		}
		if n := executions(t, logPath)["add"]; n != 2 {
			t.Errorf("add ran %d times; want 2", n)
		}
	})
	t.Run("remembered", func(t *testing.T) {
		pk, _ := gateway(t)
		npub := nostrx.EncodeNpub(pk)
		c := newCLI(t)
		// First contact, nothing known: what the gateway's answers say is
		// remembered.
		if code, out, errOut := c.run("call", npub, "add", "a=1", "b=2", "--relay", r.URL); code != 0 {
			t.Fatalf("first call: code %d, stdout %q, stderr %q", code, out, errOut)
		}
		in := watchInbox(t, r.URL, pk)
		run(t, c, in, "tools", npub)
	})
}

// A command stopped while it waits (here by SIGTERM, as a wrapper's
// timeout sends) says what it was waiting for, never a bare "context
// canceled".
func TestOneShot_StoppedCallSaysWhatItWaitedFor(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	silent := nostr.Generate().Public() // listened for below, never answers
	in := watchInbox(t, r.URL, silent)
	npub := nostrx.EncodeNpub(silent)
	p := startCVM(t, newCLI(t), "call", npub, "echo", `{"text":"hi"}`, "--relay", r.URL, "--stateless")
	in.Next(20 * time.Second) // the request is out: the command waits
	if code := p.Stop(t, syscall.SIGTERM); code != exitTransport {
		t.Errorf("exit code %d, want %d", code, exitTransport)
	}
	errOut := p.Stderr.String()
	if !strings.Contains(errOut, "stopped waiting for "+npub+" to answer, on "+r.URL+" (terminated signal received)") || strings.Contains(errOut, "context canceled") {
		t.Errorf("stderr %q", errOut)
	}
}
