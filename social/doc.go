// Package social reads and writes the Nostr events around a ContextVM
// server that are about people rather than protocol: a server's profile
// and notes (CEP-23) and reviews of servers (CEP-24).
//
// Everything here is parsed from strangers' events, so every parser is
// bounded (content size, tag count) and refuses what does not fit the
// convention with a reason wrapped around one of the sentinel errors
// (ErrWrongKind, ErrTooLarge, ErrMalformed, ErrNotAReview), for callers to
// skip and count. Parsed text is untrusted: show it as text.
//
// Files: errors.go (the sentinel errors); profile.go (Profile, kind 0:
// ParseProfile and the event that publishes one); note.go (Note, kind 1,
// and the filters for a server's notes and for profiles); review.go
// (Review, kind 1111 on a kind 11316 announcement: ParseReview, the
// discovery filter ReviewFilter, cvm's rating tag); draft.go (ReviewDraft:
// the tags of a review or reply about to be published).
package social
