package channel

import (
	"fmt"

	"fiatjaf.com/nostr"
)

// TagName names the tag that carries a receipt on a ContextVM request event:
//
//	["channel", "<the SubRAV's JSON transport encoding>"]
//
// The event's signature, which the transport verifies, authenticates it: the
// tag carries no signature of its own, and its fragment is FragmentNostr.
const TagName = "channel"

// maxTag bounds a tag value: a SubRAV's JSON is under 400 bytes.
const maxTag = 1024

// Tag returns the tag that carries r.
func Tag(r SubRAV) (nostr.Tag, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	return nostr.Tag{TagName, string(r.AppendJSON(nil))}, nil
}

// FromTags returns the receipt of an event's tags: ok is false when there is
// no channel tag, and more than one is an error (which would it be?).
func FromTags(tags nostr.Tags) (r SubRAV, ok bool, err error) {
	var found nostr.Tag
	for _, t := range tags {
		if len(t) == 0 || t[0] != TagName {
			continue
		}
		if found != nil {
			return SubRAV{}, false, fmt.Errorf("%w: more than one %q tag", ErrMalformed, TagName)
		}
		found = t
	}
	if found == nil {
		return SubRAV{}, false, nil
	}
	r, err = ParseTag(found)
	return r, err == nil, err
}

// ParseTag reads the receipt of a channel tag.
func ParseTag(t nostr.Tag) (SubRAV, error) {
	if len(t) != 2 || t[0] != TagName {
		return SubRAV{}, fmt.Errorf("%w: a %q tag has two elements, name and receipt", ErrMalformed, TagName)
	}
	if len(t[1]) > maxTag {
		return SubRAV{}, fmt.Errorf("%w: %q tag of %d bytes, at most %d", ErrMalformed, TagName, len(t[1]), maxTag)
	}
	var r SubRAV
	if err := r.UnmarshalJSON([]byte(t[1])); err != nil {
		return SubRAV{}, err
	}
	return r, nil
}
