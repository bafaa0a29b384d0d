package interop

import (
	"encoding/json"
	"slices"
	"testing"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// The reference server's profile (the SDK's profileMetadata, CEP-23) is
// shown by cvm discover, beside its announcement.
func TestReferenceProfileShownByDiscover(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	server := startTSServer(t, r.URL, "optional", "optional", map[string]string{
		"ANNOUNCE": "1", "PROFILE_JSON": `{"name":"TS Profile","about":"from the SDK","website":"https://example.com/","lud16":"ts@example.com"}`,
	})
	awaitAnnounced(t, r.URL, nostr.MustPubKeyFromHex(server), contextvm.KindServerAnnouncement, nostr.KindProfileMetadata)
	code, out, errOut := cvm(t, t.TempDir(), "discover", "--json", "--relay", r.URL)
	var servers []struct {
		Pubkey  string
		Name    string
		Profile *struct{ Name, About, Website, LUD16 string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &servers) != nil || len(servers) != 1 {
		t.Fatalf("discover: %d %s %s", code, out, errOut)
	}
	s := servers[0]
	if s.Pubkey != server || s.Name != "TS Reference Server" || s.Profile == nil || s.Profile.Name != "TS Profile" ||
		s.Profile.About != "from the SDK" || s.Profile.Website != "https://example.com/" || s.Profile.LUD16 != "ts@example.com" {
		t.Fatalf("the reference's profile, as discover shows it: %s", out)
	}
}

// cvm's reviews of the reference server (a review with a rating and a
// reply) are found by a nostr-tools reader with CEP-24's discovery filter,
// signed, with the CEP's tags.
func TestCVMReviewsReadByNostrTools(t *testing.T) {
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	server := startTSServer(t, r.URL, "optional", "optional", map[string]string{"ANNOUNCE": "1"})
	awaitAnnounced(t, r.URL, nostr.MustPubKeyFromHex(server), contextvm.KindServerAnnouncement)
	home := t.TempDir()
	if code, _, errOut := cvm(t, home, "keygen"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := cvm(t, home, "review", server, "solid", "--rating", "5", "--relay", r.URL, "--json")
	var top struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &top) != nil {
		t.Fatalf("review: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := cvm(t, home, "review", server, "a reply", "--reply-to", top.ID, "--relay", r.URL); code != 0 {
		t.Fatalf("reply: %d %s %s", code, out, errOut)
	}

	var got struct {
		OK      bool
		Error   string
		Reviews []struct {
			ID      string
			Valid   bool
			Tags    [][]string
			Content string
		}
	}
	runScript(t, "read-reviews.mjs", map[string]string{"RELAY_URL": r.URL, "PUBKEY": server}, &got)
	if !got.OK || len(got.Reviews) != 2 {
		t.Fatalf("nostr-tools read %+v", got)
	}
	addr := "11316:" + server + ":"
	for _, rv := range got.Reviews {
		has := func(tag ...string) bool {
			return slices.ContainsFunc(rv.Tags, func(t []string) bool { return len(t) >= len(tag) && slices.Equal(t[:len(tag)], tag) })
		}
		if !rv.Valid || !has("A", addr, r.URL) || !has("K", "11316") || !has("P", server, r.URL) {
			t.Errorf("%s: root tags %v (valid %v)", rv.Content, rv.Tags, rv.Valid)
		}
		switch rv.Content {
		case "solid":
			if rv.ID != top.ID || !has("a", addr, r.URL) || !has("k", "11316") || !has("p", server, r.URL) || !has("e") || !has("rating", "5", "5") {
				t.Errorf("top-level review tags %v", rv.Tags)
			}
		case "a reply":
			if !has("e", top.ID) || !has("k", "1111") || has("a") || has("rating") {
				t.Errorf("reply tags %v", rv.Tags)
			}
		default:
			t.Errorf("unexpected review %q", rv.Content)
		}
	}
}
