package social

import (
	"errors"
	"strings"
	"testing"

	"fiatjaf.com/nostr"
)

var (
	testServer = nostr.Generate().Public()
	testAuthor = nostr.Generate().Public()
	testAnnID  = nostr.ID{1, 2, 3}
)

// draftEvent builds a review event from a draft, failing the test on error.
func draftEvent(t testing.TB, d ReviewDraft) nostr.Event {
	t.Helper()
	ev, err := d.Event()
	if err != nil {
		t.Fatal(err)
	}
	ev.PubKey = testAuthor
	ev.ID = ev.GetID()
	return ev
}

func TestReviewDraft_RoundTripsThroughParseReview(t *testing.T) {
	top := draftEvent(t, ReviewDraft{Server: testServer, Announcement: testAnnID, Relay: "ws://r", Rating: 4, Content: "good"})
	r, err := ParseReview(top)
	if err != nil {
		t.Fatal(err)
	}
	if r.Server != testServer || r.Announcement != testAnnID || r.Rating != 4 || r.IsReply() || r.Content != "good" || r.Author != testAuthor {
		t.Fatalf("top-level review read as %+v", r)
	}
	reply := draftEvent(t, ReviewDraft{Server: testServer, Parent: &r, Content: "agreed"})
	rr, err := ParseReview(reply)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Parent != r.ID || rr.ParentAuthor != testAuthor || rr.Server != testServer || rr.Rating != 0 || rr.Announcement != (nostr.ID{}) {
		t.Fatalf("reply read as %+v", rr)
	}
	for _, ev := range []nostr.Event{top, reply} {
		if !ReviewFilter(testServer).Matches(ev) {
			t.Errorf("the discovery filter misses %v", ev.Tags)
		}
		if ReviewFilter(nostr.Generate().Public()).Matches(ev) {
			t.Errorf("another server's filter matches %v", ev.Tags)
		}
	}
}

// TestReviewDraft_TagsAreCEP24s checks the tags against the CEP's example
// for a top-level review, order included.
func TestReviewDraft_TagsAreCEP24s(t *testing.T) {
	ev := draftEvent(t, ReviewDraft{Server: testServer, Announcement: testAnnID, Relay: "wss://r", Content: "x"})
	s, addr := testServer.Hex(), "11316:"+testServer.Hex()+":"
	want := nostr.Tags{
		{"A", addr, "wss://r"}, {"K", "11316"}, {"P", s, "wss://r"}, {"a", addr, "wss://r"},
		{"e", testAnnID.Hex(), "wss://r", s}, {"k", "11316"}, {"p", s, "wss://r"},
	}
	if len(ev.Tags) != len(want) {
		t.Fatalf("tags %v, want %v", ev.Tags, want)
	}
	for i := range want {
		if strings.Join(ev.Tags[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("tag %d = %v, want %v", i, ev.Tags[i], want[i])
		}
	}
}

func TestReviewDraft_RefusesBadDrafts(t *testing.T) {
	other := Review{Server: nostr.Generate().Public(), ID: nostr.ID{9}}
	mine := Review{Server: testServer, ID: nostr.ID{9}}
	for name, d := range map[string]ReviewDraft{
		"empty":          {Server: testServer, Content: "  "},
		"too long":       {Server: testServer, Content: strings.Repeat("x", MaxReviewContent+1)},
		"rating 6":       {Server: testServer, Content: "x", Rating: 6},
		"rating -1":      {Server: testServer, Content: "x", Rating: -1},
		"rated reply":    {Server: testServer, Content: "x", Rating: 3, Parent: &mine},
		"other server's": {Server: testServer, Content: "x", Parent: &other},
		"not UTF-8":      {Server: testServer, Content: "\xff"},
	} {
		if _, err := d.Event(); err == nil {
			t.Errorf("%s: draft accepted", name)
		}
	}
}

func TestParseReview_RefusesWhatIsNotAReview(t *testing.T) {
	s, addr := testServer.Hex(), "11316:"+testServer.Hex()+":"
	other := nostr.Generate().Public().Hex()
	base := func(extra ...nostr.Tag) nostr.Tags {
		return append(nostr.Tags{{"A", addr}, {"K", "11316"}, {"P", s}}, extra...)
	}
	tests := []struct {
		name string
		ev   nostr.Event
		want error
	}{
		{"note", nostr.Event{Kind: 1, Tags: base(nostr.Tag{"k", "11316"})}, ErrWrongKind},
		{"oversized", nostr.Event{Kind: 1111, Content: strings.Repeat("x", MaxReviewContent+1), Tags: base(nostr.Tag{"k", "11316"})}, ErrTooLarge},
		{"many tags", nostr.Event{Kind: 1111, Tags: append(base(nostr.Tag{"k", "11316"}), make(nostr.Tags, maxReviewTags)...)}, ErrTooLarge},
		{"not UTF-8", nostr.Event{Kind: 1111, Content: "\xff", Tags: base(nostr.Tag{"k", "11316"})}, ErrMalformed},
		{"no A", nostr.Event{Kind: 1111, Tags: nostr.Tags{{"K", "11316"}, {"k", "11316"}}}, ErrMalformed},
		{"article", nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", "30023:" + s + ":post"}, {"K", "30023"}, {"k", "30023"}}}, ErrNotAReview},
		{"A with d", nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", addr + "x"}, {"K", "11316"}, {"k", "11316"}}}, ErrMalformed},
		{"A upper hex", nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", "11316:" + strings.ToUpper(s) + ":"}, {"K", "11316"}, {"k", "11316"}}}, ErrMalformed},
		{"K other", nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", addr}, {"K", "1"}, {"k", "11316"}}}, ErrNotAReview},
		{"P other", nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", addr}, {"K", "11316"}, {"P", other}, {"k", "11316"}}}, ErrNotAReview},
		{"p other", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"p", other})}, ErrNotAReview},
		{"a other", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"a", "11316:" + other + ":"})}, ErrNotAReview},
		{"two A", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"A", "11316:" + other + ":"}, nostr.Tag{"k", "11316"})}, ErrMalformed},
		{"no k", nostr.Event{Kind: 1111, Tags: base()}, ErrMalformed},
		{"k other", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "1"})}, ErrNotAReview},
		{"e by other", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"e", testAnnID.Hex(), "", other})}, ErrNotAReview},
		{"e bad", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"e", "zz"})}, ErrMalformed},
		{"reply without e", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "1111"})}, ErrMalformed},
		{"reply p and e disagree", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "1111"}, nostr.Tag{"e", testAnnID.Hex(), "", s}, nostr.Tag{"p", other})}, ErrMalformed},
		{"rated reply", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "1111"}, nostr.Tag{"e", testAnnID.Hex()}, nostr.Tag{"rating", "5", "5"})}, ErrMalformed},
		{"rating 0", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"rating", "0", "5"})}, ErrMalformed},
		{"rating 9", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"rating", "9", "5"})}, ErrMalformed},
		{"rating +4", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"rating", "+4", "5"})}, ErrMalformed},
		{"rating of 10", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"rating", "4", "10"})}, ErrMalformed},
		{"two ratings", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k", "11316"}, nostr.Tag{"rating", "1", "5"}, nostr.Tag{"rating", "5", "5"})}, ErrMalformed},
		{"empty tag value", nostr.Event{Kind: 1111, Tags: base(nostr.Tag{"k"})}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseReview(tt.ev)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseReview = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestParseReview_ReadsOtherClientsReviews: the CEP's minimal form, without
// the lowercase a, e and relay hints, and with tags in another order.
func TestParseReview_ReadsOtherClientsReviews(t *testing.T) {
	s, addr := testServer.Hex(), "11316:"+testServer.Hex()+":"
	ev := nostr.Event{Kind: 1111, Content: "ok", Tags: nostr.Tags{{"k", "11316"}, {"P", s}, {"K", "11316"}, {"A", addr, ""}, {"t", "x"}, {"rating", "3"}}}
	r, err := ParseReview(ev)
	if err != nil {
		t.Fatal(err)
	}
	if r.Server != testServer || r.Rating != 3 {
		t.Fatalf("read %+v", r)
	}
}

func FuzzParseReview(f *testing.F) {
	good := draftEvent(f, ReviewDraft{Server: testServer, Announcement: testAnnID, Relay: "ws://r", Rating: 4, Content: "good"})
	f.Add(good.String())
	f.Add(`{"kind":1111,"tags":[["A","11316:` + testServer.Hex() + `:"],["K","11316"],["k","1111"],["e","` + testAnnID.Hex() + `"]],"content":""}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var ev nostr.Event
		if err := ev.UnmarshalJSON([]byte(raw)); err != nil {
			return
		}
		r, err := ParseReview(ev)
		if err != nil {
			if !errors.Is(err, ErrWrongKind) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotAReview) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if !ReviewFilter(r.Server).Matches(ev) {
			t.Fatalf("a review the discovery filter misses: %v", ev.Tags)
		}
		if r.Rating < 0 || r.Rating > MaxRating || (r.IsReply() && r.Rating != 0) {
			t.Fatalf("rating %d on %+v", r.Rating, r)
		}
	})
}

// TestParseReview_HexIsStrict: nostr's hex decoding takes any byte for a
// digit, so two spellings of one key would name one server.
func TestParseReview_HexIsStrict(t *testing.T) {
	bad := testServer.Hex()[:60] + "zzzz"
	ev := nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", "11316:" + bad + ":"}, {"K", "11316"}, {"k", "11316"}}}
	if _, err := ParseReview(ev); !errors.Is(err, ErrMalformed) {
		t.Fatalf("A with non-hex key: %v", err)
	}
	zero := strings.Repeat("0", 64)
	ev = nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", "11316:" + testServer.Hex() + ":"}, {"K", "11316"}, {"k", "1111"}, {"e", zero}}}
	if _, err := ParseReview(ev); !errors.Is(err, ErrMalformed) {
		t.Fatalf("reply to the zero id: %v", err)
	}
}
