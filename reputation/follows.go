package reputation

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"fiatjaf.com/nostr"
)

// MaxFollowsPerList is how many keys of one follow list are read: a list
// of 100,000 keys costs no more than one of 10,000, and its first 10,000
// (in the order it gives) are the ones used. Real lists rarely pass a few
// thousand.
const MaxFollowsPerList = 10_000

// ErrNotFollowList is returned for an event that is not a kind 3.
var ErrNotFollowList = errors.New("not a follow list (kind 3)")

// FollowList is what a kind 3 event (NIP-02) says its author follows.
type FollowList struct {
	Author    nostr.PubKey
	CreatedAt nostr.Timestamp
	// Follows are the distinct valid keys of its p tags, in their order, at
	// most MaxFollowsPerList of them.
	Follows []nostr.PubKey
	// Truncated says the list had more; Invalid counts p tags that name no
	// key (they are skipped).
	Truncated bool
	Invalid   int
}

// ParseFollowList reads a kind 3 event. Its content (once relays, now
// unused) is ignored; so are tags other than p.
func ParseFollowList(evt nostr.Event) (FollowList, error) {
	if evt.Kind != nostr.KindFollowList {
		return FollowList{}, fmt.Errorf("reputation: kind %d: %w", evt.Kind, ErrNotFollowList)
	}
	fl := FollowList{Author: evt.PubKey, CreatedAt: evt.CreatedAt}
	seen := make(map[nostr.PubKey]struct{})
	for _, t := range evt.Tags {
		if len(t) < 2 || t[0] != "p" {
			continue
		}
		pk, ok := parseKey(t[1])
		if !ok {
			fl.Invalid++
			continue
		}
		if _, dup := seen[pk]; dup {
			continue
		}
		if len(fl.Follows) == MaxFollowsPerList {
			fl.Truncated = true
			break
		}
		seen[pk] = struct{}{}
		fl.Follows = append(fl.Follows, pk)
	}
	return fl, nil
}

// parseKey reads a key as tags carry it: 64 lowercase hex digits. (nostr's
// own PubKeyFromHex takes any byte for a digit: FuzzParseFollowList found
// "0X" read as "11".)
func parseKey(s string) (pk nostr.PubKey, ok bool) {
	if len(s) != 64 || strings.ToLower(s) != s {
		return pk, false
	}
	_, err := hex.Decode(pk[:], []byte(s))
	return pk, err == nil
}
