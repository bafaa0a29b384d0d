package social

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"fiatjaf.com/nostr"
)

// MaxProfileContent bounds the kind 0 content ParseProfile reads. Real
// profiles are a few hundred bytes; 64 KiB leaves room for a long "about"
// while keeping what a stranger's profile costs to parse small.
const MaxProfileContent = 64 << 10

// Profile is a key's NIP-01 metadata (kind 0), the fields CEP-23 names for
// a server's social presence. Empty fields were absent. Values are what the
// key's owner wrote: untrusted text, to be shown as text, and URLs to be
// checked before anything is fetched or linked.
type Profile struct {
	Name        string `json:"name,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
	About       string `json:"about,omitempty"`
	Picture     string `json:"picture,omitempty"`
	Banner      string `json:"banner,omitempty"`
	Website     string `json:"website,omitempty"`
	NIP05       string `json:"nip05,omitempty"`
	LUD16       string `json:"lud16,omitempty"`
}

// IsZero reports whether no field is set.
func (p Profile) IsZero() bool { return p == Profile{} }

// Label is what to call the key's owner: the display name, else the name,
// else "".
func (p Profile) Label() string {
	if p.DisplayName != "" {
		return p.DisplayName
	}
	return p.Name
}

// ParseProfile reads a kind 0 event's content. It refuses another kind,
// content over MaxProfileContent, content that is not a JSON object, and a
// known field that is neither a string nor null; unknown fields are
// ignored. The signature is not checked: events from nostrx.Pool already
// are.
func ParseProfile(ev nostr.Event) (Profile, error) {
	if ev.Kind != nostr.KindProfileMetadata {
		return Profile{}, fmt.Errorf("%w: kind %d is not a profile (kind 0)", ErrWrongKind, ev.Kind)
	}
	return parseProfileContent(ev.Content)
}

func parseProfileContent(content string) (Profile, error) {
	if len(content) > MaxProfileContent {
		return Profile{}, fmt.Errorf("%w: profile content of %d bytes, at most %d read", ErrTooLarge, len(content), MaxProfileContent)
	}
	if !utf8.ValidString(content) {
		return Profile{}, fmt.Errorf("%w: profile content is not UTF-8", ErrMalformed)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &fields); err != nil || fields == nil {
		return Profile{}, fmt.Errorf("%w: profile content is not a JSON object", ErrMalformed)
	}
	var p Profile
	for name, dst := range p.fields() {
		raw, ok := fields[name]
		if !ok || bytes.Equal(raw, []byte("null")) {
			continue
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return Profile{}, fmt.Errorf("%w: profile field %q is not a string", ErrMalformed, name)
		}
	}
	return p, nil
}

// fields maps each JSON name to its field, for parsing field by field.
func (p *Profile) fields() map[string]*string {
	return map[string]*string{
		"name": &p.Name, "display_name": &p.DisplayName, "about": &p.About,
		"picture": &p.Picture, "banner": &p.Banner, "website": &p.Website,
		"nip05": &p.NIP05, "lud16": &p.LUD16,
	}
}

// Event is the unsigned kind 0 event that publishes p, created at now.
func (p Profile) Event() nostr.Event {
	content, _ := json.Marshal(p) // a struct of strings always encodes
	return nostr.Event{Kind: nostr.KindProfileMetadata, CreatedAt: nostr.Now(), Tags: nostr.Tags{}, Content: string(content)}
}
