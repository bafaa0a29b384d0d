package social

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"fiatjaf.com/nostr"
)

// ReviewDraft is a review or reply about to be signed and published.
type ReviewDraft struct {
	// Server is the key whose announcement is reviewed.
	Server nostr.PubKey
	// Announcement is the server's current announcement event, anchored
	// by a top-level review's e tag; zero leaves it out.
	Announcement nostr.ID
	// Relay is the hint written into the tags that take one: a relay
	// where the server's announcement can be found. Empty is allowed.
	Relay string
	// Parent, when set, makes this a reply to that review or reply.
	Parent *Review
	// Rating is 1..MaxRating, or 0 for none; only on a top-level review.
	Rating  int
	Content string
}

// Event is the unsigned kind 1111 event that publishes d, with CEP-24's
// tags, created at now. It refuses empty or oversized text, a rating out
// of range or on a reply, and a parent from another server's thread.
func (d ReviewDraft) Event() (nostr.Event, error) {
	if err := d.check(); err != nil {
		return nostr.Event{}, err
	}
	server, addr := d.Server.Hex(), ServerAddress(d.Server)
	tags := nostr.Tags{
		{"A", addr, d.Relay},
		{"K", kindAnnouncement},
		{"P", server, d.Relay},
	}
	if p := d.Parent; p != nil {
		tags = append(tags,
			nostr.Tag{"e", p.ID.Hex(), d.Relay, p.Author.Hex()},
			nostr.Tag{"k", kindComment},
			nostr.Tag{"p", p.Author.Hex(), d.Relay})
	} else {
		tags = append(tags, nostr.Tag{"a", addr, d.Relay})
		if d.Announcement != (nostr.ID{}) {
			tags = append(tags, nostr.Tag{"e", d.Announcement.Hex(), d.Relay, server})
		}
		tags = append(tags, nostr.Tag{"k", kindAnnouncement}, nostr.Tag{"p", server, d.Relay})
		if d.Rating != 0 {
			tags = append(tags, nostr.Tag{TagRating, strconv.Itoa(d.Rating), strconv.Itoa(MaxRating)})
		}
	}
	return nostr.Event{Kind: nostr.KindComment, CreatedAt: nostr.Now(), Tags: tags, Content: d.Content}, nil
}

func (d ReviewDraft) check() error {
	switch {
	case strings.TrimSpace(d.Content) == "":
		return errors.New("social: a review needs text")
	case len(d.Content) > MaxReviewContent:
		return fmt.Errorf("social: a review of %d bytes, at most %d", len(d.Content), MaxReviewContent)
	case !utf8.ValidString(d.Content):
		return errors.New("social: a review's text must be UTF-8")
	case d.Rating < 0 || d.Rating > MaxRating:
		return fmt.Errorf("social: rating %d, want 1 to %d (or none)", d.Rating, MaxRating)
	case d.Parent != nil && d.Rating != 0:
		return errors.New("social: a reply takes no rating (ratings are on top-level reviews)")
	case d.Parent != nil && d.Parent.Server != d.Server:
		return errors.New("social: the review replied to is about another server")
	}
	return nil
}
