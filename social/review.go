package social

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
)

// Reviews (CEP-24) are NIP-22 comments (kind 1111) on a server's
// announcement, addressed as "11316:<server-pubkey>:". A top-level review
// tags the announcement as both root (A, K, P) and parent (a, k, p), and
// may anchor the announcement event it was written against (e); a reply
// keeps the root and names the parent comment (e, k = 1111, p). A rating is
// cvm's extension: ["rating", "N", "5"], N from 1 to 5, on a top-level
// review only.

const (
	// MaxReviewContent bounds the text of a review ParseReview reads and a
	// ReviewDraft writes: a review is a few sentences, and a page shows
	// many of them.
	MaxReviewContent = 16 << 10
	// maxReviewTags bounds the tags ParseReview looks at: a review needs
	// eight, and each extra one is work a stranger chose for us.
	maxReviewTags = 64
	// MaxRating is the top of the rating scale (the tag's third element).
	MaxRating = 5
	// TagRating names cvm's rating tag.
	TagRating = "rating"
)

var (
	kindAnnouncement = strconv.Itoa(int(contextvm.KindServerAnnouncement))
	kindComment      = strconv.Itoa(int(nostr.KindComment))
)

// Review is a parsed CEP-24 review or a reply to one. Content is untrusted
// text. The signature is not checked here: events from nostrx.Pool already
// are.
type Review struct {
	ID     nostr.ID     `json:"id"`
	Author nostr.PubKey `json:"author"`
	// Server is the key whose announcement the thread is about (the A tag).
	Server nostr.PubKey `json:"server"`
	// Announcement is the announcement event a top-level review was
	// written against (its e tag), zero when it names none and for replies.
	Announcement nostr.ID `json:"announcement"`
	// Rating is 1..MaxRating, or 0 when the review gives none.
	Rating int `json:"rating,omitempty"`
	// Parent is the comment a reply answers, zero for a top-level review;
	// ParentAuthor its author when the reply names one.
	Parent       nostr.ID        `json:"parent"`
	ParentAuthor nostr.PubKey    `json:"parentAuthor"`
	Content      string          `json:"content"`
	CreatedAt    nostr.Timestamp `json:"createdAt"`
}

// IsReply reports whether r answers another comment rather than the server.
func (r Review) IsReply() bool { return r.Parent != nostr.ID{} }

// ServerAddress is the address reviews of server point at (their A tag).
func ServerAddress(server nostr.PubKey) string {
	return kindAnnouncement + ":" + server.Hex() + ":"
}

// ReviewFilter is CEP-24's discovery filter for the reviews of servers,
// replies included.
func ReviewFilter(servers ...nostr.PubKey) nostr.Filter {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = ServerAddress(s)
	}
	return nostr.Filter{
		Kinds: []nostr.Kind{nostr.KindComment},
		Tags:  nostr.TagMap{"K": {kindAnnouncement}, "A": addrs},
	}
}

// ParseReview reads a kind 1111 event as a review. It refuses another kind
// (ErrWrongKind); content over MaxReviewContent or too many tags
// (ErrTooLarge); a comment on anything but a server announcement, or whose
// tags name two different targets (ErrNotAReview); and missing, repeated
// and contradictory tags or a bad rating (ErrMalformed). Relay hints are
// ignored.
func ParseReview(ev nostr.Event) (Review, error) {
	if ev.Kind != nostr.KindComment {
		return Review{}, fmt.Errorf("%w: kind %d is not a comment (kind 1111)", ErrWrongKind, ev.Kind)
	}
	if len(ev.Content) > MaxReviewContent {
		return Review{}, fmt.Errorf("%w: review of %d bytes, at most %d read", ErrTooLarge, len(ev.Content), MaxReviewContent)
	}
	if !utf8.ValidString(ev.Content) {
		return Review{}, fmt.Errorf("%w: review text is not UTF-8", ErrMalformed)
	}
	if len(ev.Tags) > maxReviewTags {
		return Review{}, fmt.Errorf("%w: %d tags, at most %d read", ErrTooLarge, len(ev.Tags), maxReviewTags)
	}
	t, err := indexTags(ev.Tags)
	if err != nil {
		return Review{}, err
	}
	r := Review{ID: ev.ID, Author: ev.PubKey, Content: ev.Content, CreatedAt: ev.CreatedAt}
	if r.Server, err = t.root(); err != nil {
		return Review{}, err
	}
	switch k := t.value("k"); k {
	case kindAnnouncement:
		err = t.topLevel(&r)
	case kindComment:
		err = t.reply(&r)
	case "":
		err = fmt.Errorf("%w: no k tag (the parent's kind)", ErrMalformed)
	default:
		err = fmt.Errorf("%w: a comment on a kind %.10q, not on a server or a review", ErrNotAReview, k)
	}
	if err != nil {
		return Review{}, err
	}
	if r.Rating, err = t.rating(r.IsReply()); err != nil {
		return Review{}, err
	}
	return r, nil
}

// reviewTags holds the one tag of each name a review reads.
type reviewTags map[string]nostr.Tag

// read are the tag names ParseReview looks at; the rest are ignored.
var read = []string{"A", "K", "P", "a", "k", "p", "e", TagRating}

// indexTags keeps the tag of each name ParseReview reads, refusing names
// that appear twice with different values: which one would count is a
// choice the author must not get to make differently for different readers.
func indexTags(tags nostr.Tags) (reviewTags, error) {
	t := make(reviewTags, len(read))
	for _, tag := range tags {
		if len(tag) == 0 || !slices.Contains(read, tag[0]) {
			continue
		}
		if len(tag) < 2 || tag[1] == "" {
			return nil, fmt.Errorf("%w: %.10q tag without a value", ErrMalformed, tag[0])
		}
		if old, ok := t[tag[0]]; ok && old[1] != tag[1] {
			return nil, fmt.Errorf("%w: two %q tags that disagree", ErrMalformed, tag[0])
		}
		if _, ok := t[tag[0]]; !ok {
			t[tag[0]] = tag
		}
	}
	return t, nil
}

func (t reviewTags) value(name string) string {
	if tag, ok := t[name]; ok {
		return tag[1]
	}
	return ""
}

// root reads the thread's root, which must be a server announcement: A,
// K and, when present, P.
func (t reviewTags) root() (nostr.PubKey, error) {
	a := t.value("A")
	if a == "" {
		return nostr.PubKey{}, fmt.Errorf("%w: no A tag (the server's address)", ErrMalformed)
	}
	server, err := parseServerAddress(a)
	if err != nil {
		return nostr.PubKey{}, err
	}
	if k := t.value("K"); k != kindAnnouncement {
		return nostr.PubKey{}, fmt.Errorf("%w: K tag %.10q, want %s", ErrNotAReview, k, kindAnnouncement)
	}
	if err := t.samePubKey("P", server); err != nil {
		return nostr.PubKey{}, err
	}
	return server, nil
}

// parseServerAddress reads "11316:<64 hex>:".
func parseServerAddress(a string) (nostr.PubKey, error) {
	kind, rest, _ := strings.Cut(a, ":")
	if kind != kindAnnouncement {
		return nostr.PubKey{}, fmt.Errorf("%w: A tag %.80q is not a server announcement's address", ErrNotAReview, a)
	}
	hexKey, d, ok := strings.Cut(rest, ":")
	if !ok || d != "" {
		return nostr.PubKey{}, fmt.Errorf("%w: A tag %.80q, want \"11316:<pubkey>:\"", ErrMalformed, a)
	}
	pk, err := parsePubKey(hexKey)
	if err != nil {
		return nostr.PubKey{}, fmt.Errorf("%w: A tag %.80q: %v", ErrMalformed, a, err)
	}
	return pk, nil
}

// parsePubKey reads 64 lowercase hex characters, the only form tags have.
func parsePubKey(s string) (nostr.PubKey, error) {
	var pk nostr.PubKey
	return pk, parseHex32(s, (*[32]byte)(&pk))
}

// parseID reads an event id as parsePubKey reads a key; the zero id, which
// no event has, is refused so that a zero Parent keeps meaning "none".
func parseID(s string) (nostr.ID, error) {
	var id nostr.ID
	if err := parseHex32(s, (*[32]byte)(&id)); err != nil {
		return id, err
	}
	if id == (nostr.ID{}) {
		return id, errors.New("the zero id")
	}
	return id, nil
}

// parseHex32 is strict where nostr's own hex decoding is not: it takes
// any byte for a digit.
func parseHex32(s string, dst *[32]byte) error {
	if len(s) != 64 || strings.ToLower(s) != s {
		return errors.New("not 64 lowercase hex characters")
	}
	if _, err := hex.Decode(dst[:], []byte(s)); err != nil {
		return errors.New("not 64 lowercase hex characters")
	}
	return nil
}

// samePubKey checks that the tag name, when present, names want.
func (t reviewTags) samePubKey(name string, want nostr.PubKey) error {
	v := t.value(name)
	if v == "" {
		return nil
	}
	pk, err := parsePubKey(v)
	if err != nil {
		return fmt.Errorf("%w: %s tag: %v", ErrMalformed, name, err)
	}
	if pk != want {
		return fmt.Errorf("%w: %s tag names another key than the thread's", ErrNotAReview, name)
	}
	return nil
}

// topLevel reads a review of the server itself: a and p, when present,
// agree with the root, and e, when present, is the announcement it was
// written against (by the server, when its fourth element says who).
func (t reviewTags) topLevel(r *Review) error {
	if a := t.value("a"); a != "" && a != t.value("A") {
		return fmt.Errorf("%w: a and A tags name different targets", ErrNotAReview)
	}
	if err := t.samePubKey("p", r.Server); err != nil {
		return err
	}
	e, ok := t["e"]
	if !ok {
		return nil
	}
	id, err := parseID(e[1])
	if err != nil {
		return fmt.Errorf("%w: e tag: %v", ErrMalformed, err)
	}
	if len(e) > 3 && e[3] != "" && e[3] != r.Server.Hex() {
		return fmt.Errorf("%w: e tag names an event by another key than the server", ErrNotAReview)
	}
	r.Announcement = id
	return nil
}

// reply reads a reply to a comment: e names the parent, and p and e's
// fourth element, when present, its author.
func (t reviewTags) reply(r *Review) error {
	if a := t.value("a"); a != "" && a != t.value("A") {
		return fmt.Errorf("%w: a and A tags name different targets", ErrNotAReview)
	}
	e, ok := t["e"]
	if !ok {
		return fmt.Errorf("%w: a reply (k 1111) without an e tag (its parent)", ErrMalformed)
	}
	id, err := parseID(e[1])
	if err != nil {
		return fmt.Errorf("%w: e tag: %v", ErrMalformed, err)
	}
	r.Parent = id
	if len(e) > 3 && e[3] != "" {
		if r.ParentAuthor, err = parsePubKey(e[3]); err != nil {
			return fmt.Errorf("%w: e tag's author: %v", ErrMalformed, err)
		}
	}
	p := t.value("p")
	if p == "" {
		return nil
	}
	pk, err := parsePubKey(p)
	if err != nil {
		return fmt.Errorf("%w: p tag: %v", ErrMalformed, err)
	}
	if r.ParentAuthor != (nostr.PubKey{}) && pk != r.ParentAuthor {
		return fmt.Errorf("%w: p and e tags name different parent authors", ErrMalformed)
	}
	r.ParentAuthor = pk
	return nil
}

// rating reads ["rating", "N", "5"], N from 1 to MaxRating; the scale may
// be left out. A reply carries none: a rating is about the server.
func (t reviewTags) rating(reply bool) (int, error) {
	tag, ok := t[TagRating]
	if !ok {
		return 0, nil
	}
	if reply {
		return 0, fmt.Errorf("%w: a reply with a rating (ratings are on top-level reviews)", ErrMalformed)
	}
	n, err := strconv.Atoi(tag[1])
	if err != nil || n < 1 || n > MaxRating || len(tag[1]) != 1 {
		return 0, fmt.Errorf("%w: rating %.10q, want 1 to %d", ErrMalformed, tag[1], MaxRating)
	}
	if len(tag) > 2 && tag[2] != strconv.Itoa(MaxRating) {
		return 0, fmt.Errorf("%w: rating out of %.10q, want out of %d", ErrMalformed, tag[2], MaxRating)
	}
	return n, nil
}
