package social

import (
	"fmt"
	"unicode/utf8"

	"fiatjaf.com/nostr"
)

// MaxNoteContent bounds the kind 1 content ParseNote reads: a server's
// notes are updates and changelogs, and a page shows a few of them.
const MaxNoteContent = 16 << 10

// Note is a kind 1 text note a server published as itself (CEP-23's
// optional social communications). Content is untrusted text.
type Note struct {
	ID        nostr.ID        `json:"id"`
	Author    nostr.PubKey    `json:"author"`
	Content   string          `json:"content"`
	CreatedAt nostr.Timestamp `json:"createdAt"`
}

// ParseNote reads a kind 1 event, refusing another kind and content that
// is over MaxNoteContent or not UTF-8.
func ParseNote(ev nostr.Event) (Note, error) {
	if ev.Kind != nostr.KindTextNote {
		return Note{}, fmt.Errorf("%w: kind %d is not a note (kind 1)", ErrWrongKind, ev.Kind)
	}
	if len(ev.Content) > MaxNoteContent {
		return Note{}, fmt.Errorf("%w: note of %d bytes, at most %d read", ErrTooLarge, len(ev.Content), MaxNoteContent)
	}
	if !utf8.ValidString(ev.Content) {
		return Note{}, fmt.Errorf("%w: note is not UTF-8", ErrMalformed)
	}
	return Note{ID: ev.ID, Author: ev.PubKey, Content: ev.Content, CreatedAt: ev.CreatedAt}, nil
}

// NoteEvent is the unsigned kind 1 event that publishes text, created at
// now.
func NoteEvent(text string) nostr.Event {
	return nostr.Event{Kind: nostr.KindTextNote, CreatedAt: nostr.Now(), Tags: nostr.Tags{}, Content: text}
}

// NotesFilter asks for the newest limit notes of the servers.
func NotesFilter(limit int, servers ...nostr.PubKey) nostr.Filter {
	return nostr.Filter{Kinds: []nostr.Kind{nostr.KindTextNote}, Authors: servers, Limit: limit}
}

// ProfilesFilter asks for the profiles (kind 0) of keys.
func ProfilesFilter(keys ...nostr.PubKey) nostr.Filter {
	return nostr.Filter{Kinds: []nostr.Kind{nostr.KindProfileMetadata}, Authors: keys}
}
