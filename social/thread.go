package social

import "fiatjaf.com/nostr"

// Thread is a review and the replies to it, each a Thread too.
type Thread struct {
	Review
	Replies []Thread `json:"replies,omitempty"`
}

// maxThreadDepth bounds how deep Threads nests replies: deeper ones are
// shown at this depth, so that a chain of a thousand replies costs no
// recursion of a thousand frames.
const maxThreadDepth = 16

// Threads arranges reviews (of one server, oldest first as Fetch gives
// them) into threads: top-level reviews at the root, each reply under its
// parent. A reply whose parent is missing (not fetched, or deleted) is
// shown at the root, so that nothing fetched goes unshown.
func Threads(reviews []Review) []Thread {
	children := make(map[nostr.ID][]Review)
	known := make(map[nostr.ID]bool, len(reviews))
	for _, r := range reviews {
		known[r.ID] = true
	}
	var roots []Review
	for _, r := range reviews {
		if r.IsReply() && known[r.Parent] && r.Parent != r.ID {
			children[r.Parent] = append(children[r.Parent], r)
		} else {
			roots = append(roots, r)
		}
	}
	placed := make(map[nostr.ID]bool, len(reviews))
	var build func(r Review, depth int) Thread
	build = func(r Review, depth int) Thread {
		placed[r.ID] = true
		t := Thread{Review: r}
		for _, c := range children[r.ID] {
			if placed[c.ID] {
				continue // a cycle of ids: each review is shown once
			}
			if depth+1 >= maxThreadDepth {
				placed[c.ID] = true
				t.Replies = append(t.Replies, Thread{Review: c})
				continue
			}
			t.Replies = append(t.Replies, build(c, depth+1))
		}
		return t
	}
	out := make([]Thread, 0, len(roots))
	for _, r := range roots {
		out = append(out, build(r, 0))
	}
	return out
}
