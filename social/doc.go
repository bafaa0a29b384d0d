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
// ParseProfile and the event that publishes one) and check.go (what a
// profile must be before cvm publishes it; SplitAddress, name@domain);
// note.go (Note, kind 1, and the filters for a server's notes and for
// profiles); review.go (Review, kind 1111 on a kind 11316 announcement:
// ParseReview, the discovery filter ReviewFilter, cvm's rating tag);
// draft.go (ReviewDraft: the tags of a review or reply about to be
// published); thread.go (Threads: reviews arranged under their parents);
// fetch.go (Fetch: the profiles, notes and reviews of keys, in one query
// each, bounded); publish.go (PublishProfile: a profile published only
// when the relays have another); nip05.go (ResolveNIP05 and VerifyNIP05,
// through an outbound.Fetcher); view.go (ThreadView, threads as people
// read them, with their authors' names).
package social
