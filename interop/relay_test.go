package interop

import (
	"slices"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// TestNostrTools_AgainstCVMRelay: nostr-tools publishes to and subscribes from
// cvm's relay, including a replaceable event and an ephemeral one.
func TestNostrTools_AgainstCVMRelay(t *testing.T) {
	s := relaytest.Start(t, relay.Options{Name: "cvm interop"})

	goEvent := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: "signed in Go", Tags: nostr.Tags{}}
	if err := goEvent.Sign(nostr.Generate()); err != nil {
		t.Fatal(err)
	}
	if err := s.Store().SaveEvent(goEvent); err != nil {
		t.Fatal(err)
	}

	var got struct {
		OK              bool     `json:"ok"`
		Error           string   `json:"error"`
		NoteID          string   `json:"noteID"`
		TagQuery        []string `json:"tagQuery"`
		Replaceable     []string `json:"replaceable"`
		UnheardReason   string   `json:"unheardReason"`
		Live            []string `json:"live"`
		EphemeralStored int      `json:"ephemeralStored"`
		GoEventVerified bool     `json:"goEventVerified"`
		NIP11           struct {
			Name          string `json:"name"`
			SupportedNIPs []int  `json:"supported_nips"`
		} `json:"nip11"`
	}
	runScript(t, "relay-check.mjs", map[string]string{
		"RELAY_URL":   s.URL,
		"GO_EVENT_ID": goEvent.ID.Hex(),
	}, &got)
	if !got.OK {
		t.Fatalf("nostr-tools run failed: %s", got.Error)
	}
	if !slices.Equal(got.TagQuery, []string{got.NoteID}) {
		t.Errorf("#t query returned %v, want the note %s", got.TagQuery, got.NoteID)
	}
	if !slices.Equal(got.Replaceable, []string{"wss://two"}) {
		t.Errorf("replaceable kind 10002: got %v, want only the latest (wss://two)", got.Replaceable)
	}
	if !strings.Contains(got.UnheardReason, "mute") {
		t.Errorf("ephemeral event nobody listens for: %q, want a mute: reason", got.UnheardReason)
	}
	if !slices.Equal(got.Live, []string{"for me"}) {
		t.Errorf("live #p subscription received %v, want only the event addressed to it", got.Live)
	}
	if got.EphemeralStored != 0 {
		t.Errorf("%d ephemeral events stored", got.EphemeralStored)
	}
	if !got.GoEventVerified {
		t.Error("nostr-tools did not verify the Go-signed event served by the relay")
	}
	if got.NIP11.Name != "cvm interop" || !slices.Contains(got.NIP11.SupportedNIPs, 1) {
		t.Errorf("NIP-11 via nostr-tools: %+v", got.NIP11)
	}

	// The other direction: what nostr-tools signed is stored intact and
	// verifies in Go.
	id, err := nostr.IDFromHex(got.NoteID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for evt := range s.Store().QueryEvents(nostr.Filter{IDs: []nostr.ID{id}}, 1) {
		n++
		if !evt.CheckID() || !evt.VerifySignature() {
			t.Error("stored nostr-tools event does not verify in Go")
		}
	}
	if n != 1 {
		t.Errorf("nostr-tools note stored %d times, want 1", n)
	}
}
