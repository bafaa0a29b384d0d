package interop

import (
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// What cvm's one-shot commands remember of a server (the cache directory)
// saves round trips; it must never turn a call that would succeed into a
// failure. The reference server drops, without a word, what its encryption
// mode refuses, so a wrong belief about it shows only as silence.

// The sequence of issue #25: against the reference server with encryption
// disabled, `cvm call --encryption disabled` succeeded, and every
// `cvm call --encryption optional` after it waited out its timeout: the
// remembered server was sent its stateless tools/call gift-wrapped, which a
// tool call never falls back from. With a persistent identity, as a user
// has, and with a throwaway key each run, as cvm uses without one.
func TestOneShot_ReferenceDisabledServerAfterADisabledCall(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	key := nostr.Generate()
	startTSServerKey(t, r.URL, key, "disabled")
	wire := watchWire(t, r.URL, key.Public())
	for _, identity := range []string{"persistent", "throwaway"} {
		t.Run(identity, func(t *testing.T) {
			home := t.TempDir()
			if identity == "persistent" {
				if code, _, errOut := cvm(t, home, "keygen"); code != 0 {
					t.Fatalf("keygen: %s", errOut)
				}
			}
			callAdd(t, home, r.URL, key.Public(), "disabled")
			wire.take()
			for i := range 3 {
				errOut := callAdd(t, home, r.URL, key.Public(), "optional")
				// What the first call learned (its answer said nothing of
				// encryption) makes every later one plaintext at once.
				if got := wire.take(); got != (wireCount{plain: 1}) {
					t.Errorf("optional call %d published %+v to the server; want one plaintext event (stderr %q)", i+1, got, errOut)
				}
			}
		})
	}
}

// A server that changes its encryption between runs (same key, restarted):
// what was remembered is out of date, the call still succeeds, stderr says
// what happened, and the next run goes the right way at once.
func TestOneShot_ReferenceServerChangesEncryption(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		// how the call after the change is sent again, and the events of
		// the run after that
		resent string
		next   wireCount
	}{
		{"optional", "disabled", "in plaintext", wireCount{plain: 1}},
		{"disabled", "required", "gift-wrapped", wireCount{wrapped: 1}},
	} {
		t.Run(tc.before+"-then-"+tc.after, func(t *testing.T) {
			t.Parallel()
			r := relaytest.Start(t, relay.Options{})
			key := nostr.Generate()
			home := t.TempDir()
			if code, _, errOut := cvm(t, home, "keygen"); code != 0 {
				t.Fatalf("keygen: %s", errOut)
			}
			stop := startTSServerKey(t, r.URL, key, tc.before)
			callAdd(t, home, r.URL, key.Public(), "optional")
			callAdd(t, home, r.URL, key.Public(), "optional") // remembered
			stop()

			startTSServerKey(t, r.URL, key, tc.after)
			wire := watchWire(t, r.URL, key.Public())
			errOut := callAdd(t, home, r.URL, key.Public(), "optional")
			if !strings.Contains(errOut, "sending the request again "+tc.resent) || !strings.Contains(errOut, "remembered") {
				t.Errorf("stderr %q: want it to say the call went again %s and the cache was updated", errOut, tc.resent)
			}
			wire.take()
			errOut = callAdd(t, home, r.URL, key.Public(), "optional")
			if got := wire.take(); got != tc.next {
				t.Errorf("the run after published %+v; want %+v (stderr %q)", got, tc.next, errOut)
			}
		})
	}
}

// callAdd runs `cvm call SERVER add a=2 b=3` with encryption enc and
// returns its stderr; it fails the test unless the sum comes back.
func callAdd(t *testing.T, home, relayURL string, server nostr.PubKey, enc string) string {
	t.Helper()
	code, out, errOut := cvm(t, home, "call", nostrx.EncodeNpub(server), "add", "a=2", "b=3", "--relay", relayURL, "--encryption", enc, "--timeout", "20s")
	if code != 0 || out != "5\n" {
		t.Fatalf("cvm call --encryption %s: code %d, stdout %q, stderr %q", enc, code, out, errOut)
	}
	return errOut
}

// startTSServerKey runs the reference server under key with encryption
// enc, and returns the function that stops it before the test ends.
func startTSServerKey(t *testing.T, relayURL string, key nostr.SecretKey, enc string) (stop func()) {
	t.Helper()
	var ready struct{ Pubkey string }
	_, stop = startNodeStoppable(t, "js/ts-server.mjs", map[string]string{
		"RELAY_URL": relayURL, "ENCRYPTION": enc, "GIFT_WRAP": "optional", "READY_DELAY_MS": "500", "SERVER_PRIVKEY": key.Hex(),
	}, &ready)
	waitListening(t, relayURL, ready.Pubkey)
	return stop
}

// wireCount is what reached a server: plaintext messages and gift wraps.
type wireCount struct{ plain, wrapped int }

// wire watches what reaches a server on a relay.
type wire struct{ in *relaytest.Inbox }

func watchWire(t *testing.T, relayURL string, server nostr.PubKey) wire {
	return wire{relaytest.WatchInbox(t, relayURL, server, contextvm.KindMessage, contextvm.KindGiftWrap, contextvm.KindEphemeralGiftWrap)}
}

// take counts what reached the server since the last take, waitListening's
// probes left out.
func (w wire) take() wireCount {
	var n wireCount
	for _, e := range w.in.Take() {
		switch {
		case e.Kind == contextvm.KindMessage && e.Content == "{}":
		case e.Kind == contextvm.KindMessage:
			n.plain++
		default:
			n.wrapped++
		}
	}
	return n
}
