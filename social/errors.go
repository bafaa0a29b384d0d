package social

import "errors"

// Errors ParseProfile, ParseNote and ParseReview wrap with the reason; match
// them with errors.Is.
var (
	// ErrWrongKind: the event is not of the kind the parser reads.
	ErrWrongKind = errors.New("social: wrong event kind")
	// ErrTooLarge: the content is longer than the parser reads.
	ErrTooLarge = errors.New("social: content too large")
	// ErrMalformed: the content or a tag does not have the form the
	// convention gives it.
	ErrMalformed = errors.New("social: malformed event")
	// ErrNotAReview: a kind 1111 comment on something other than a
	// server announcement (kind 11316), or whose tags name two targets.
	ErrNotAReview = errors.New("social: not a server review")
)
