package main

import (
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestLogs_DefaultLevelSaysWhatAPersonNeeds runs a priced tool through
// cvm wallet-sim at the default log level and reads every stderr: a call
// refused over --max-sats says why and nothing else, and its withdrawal
// reaches the gateway; a paid call says what it paid, once; a gateway
// (announcing) stopped with SIGTERM warns of nothing.
func TestLogs_DefaultLevelSaysWhatAPersonNeeds(t *testing.T) {
	c := newCLI(t)
	w := newSimWorld(t, c, "--announce")
	gw, ready := w.gateway, w.ready
	gw.Stderr.Await(t, 20*time.Second, "msg=announced")

	call := []string{"call", ready.Npub, "add", "a=1", "b=2", "--relay", w.relay, "--wallet-file", w.alice, "--yes"}
	code, _, errOut := c.run(append(call, "--max-sats", "5")...)
	if want := "cvm: the call costs 10 sats, more than --max-sats; raise --max-sats to pay it\n"; code != exitPayment || !strings.HasSuffix(errOut, want) || strings.Contains(errOut, "level=") {
		t.Errorf("refused call: code %d, stderr:\n%s\nwant no log line, and %q", code, errOut, want)
	}
	// The gateway was told, and stopped waiting for the payment.
	gw.Stderr.Await(t, 20*time.Second, "the client withdrew a request before paying for it")

	code, out, errOut := c.run(append(call, "--max-sats", "10")...)
	if code != 0 || out != `{"sum":3}`+"\n" || strings.Count(errOut, "paid 10 sats to "+ready.Npub) != 1 || strings.Contains(errOut, "level=") {
		t.Errorf("paid call: code %d, stdout %q, stderr:\n%s\nwant one line saying what was paid, no log line", code, out, errOut)
	}

	if code := gw.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("gateway exit %d; stderr:\n%s", code, gw.Stderr)
	}
	for _, line := range strings.Split(gw.Stderr.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the gateway warns at the default level: %s", line)
		}
	}
}
