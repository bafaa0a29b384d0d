package contextvm

import "fiatjaf.com/nostr"

// seenSet remembers the last n event ids, to drop a message delivered twice
// (inside two different wraps, or from two relays). Not safe for concurrent
// use; callers hold their own lock.
type seenSet struct {
	ids  []nostr.ID
	set  map[nostr.ID]struct{}
	next int
}

func newSeenSet(n int) *seenSet {
	return &seenSet{ids: make([]nostr.ID, 0, n), set: make(map[nostr.ID]struct{}, n)}
}

// seen records id and reports whether it was already there.
func (s *seenSet) seen(id nostr.ID) bool {
	if _, ok := s.set[id]; ok {
		return true
	}
	if len(s.ids) < cap(s.ids) {
		s.ids = append(s.ids, id)
	} else {
		delete(s.set, s.ids[s.next])
		s.ids[s.next] = id
		s.next = (s.next + 1) % len(s.ids)
	}
	s.set[id] = struct{}{}
	return false
}
