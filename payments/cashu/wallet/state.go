package wallet

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/cvmgo/cvm/payments/cashu"
)

// mintState is one mint's proof file as read and changed since: the
// spendable proofs, the pending operations and the sent tokens, each by
// its key (see record), and their sums, kept up to date as they change so
// that a balance costs nothing.
type mintState struct {
	mint    string
	proofs  map[string]cashu.Proof
	pending map[string]pendingOp
	sent    map[string]sentToken

	sats, pendingSats, sentSats uint64
}

func newMintState(mint string) *mintState {
	return &mintState{mint: mint, proofs: map[string]cashu.Proof{}, pending: map[string]pendingOp{}, sent: map[string]sentToken{}}
}

// loadJournal replays a whole journal, data, of mint (any mint when
// empty). It returns the state and the length of data its records take
// (a torn last record is left out).
func loadJournal(data []byte, mint string) (*mintState, int, error) {
	recs, n, err := parseRecords(data)
	if err != nil {
		return nil, 0, err
	}
	if len(recs) == 0 {
		return nil, 0, fmt.Errorf("%w: no complete first record", ErrCorrupt)
	}
	head := recs[0]
	switch {
	case head.Version != journalVersion:
		return nil, 0, fmt.Errorf("cashu wallet: proof file version %d, this cvm reads %d", head.Version, journalVersion)
	case mint != "" && head.Mint != mint:
		return nil, 0, fmt.Errorf("cashu wallet: proof file of %s, not %s", head.Mint, mint)
	}
	s := newMintState(head.Mint)
	for _, r := range recs {
		if err := s.apply(r); err != nil {
			return nil, 0, err
		}
	}
	return s, n, nil
}

// loadV1 reads a proof file of version 1, one JSON document.
func loadV1(data []byte, mint string) (*mintState, error) {
	var f mintFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("cashu wallet: unreadable proof file: %w", err)
	}
	switch {
	case f.Version != 1:
		return nil, fmt.Errorf("cashu wallet: proof file version %d, this cvm reads %d", f.Version, journalVersion)
	case mint != "" && f.Mint != mint:
		return nil, fmt.Errorf("cashu wallet: proof file of %s, not %s", f.Mint, mint)
	}
	s := newMintState(f.Mint)
	return s, s.apply(record{Proofs: f.Proofs, Pending: f.Pending})
}

// apply changes s by r: removals first, then additions (see record). A
// record that names nothing to key by changes nothing and is an error.
func (s *mintState) apply(r record) error {
	if (r.Version != 0 || r.Mint != "") && r.Mint != s.mint {
		return fmt.Errorf("%w: a second first record", ErrCorrupt)
	}
	for _, p := range r.Proofs {
		if p.Secret == "" {
			return fmt.Errorf("%w: a proof without a secret", ErrCorrupt)
		}
	}
	for _, p := range r.Pending {
		if len(p.Outputs) == 0 {
			return fmt.Errorf("%w: a pending operation without outputs", ErrCorrupt)
		}
	}
	for _, t := range r.Sent {
		if len(t.Proofs) == 0 {
			return fmt.Errorf("%w: a sent token without proofs", ErrCorrupt)
		}
	}
	for _, k := range r.Spent {
		s.sats -= s.proofs[k].Amount
		delete(s.proofs, k)
	}
	for _, k := range r.Done {
		s.pendingSats -= s.pending[k].amount()
		delete(s.pending, k)
	}
	for _, k := range r.Unsent {
		s.sentSats -= s.sent[k].Amount
		delete(s.sent, k)
	}
	for _, p := range r.Proofs {
		s.sats += p.Amount - s.proofs[p.Secret].Amount
		s.proofs[p.Secret] = p
	}
	for _, p := range r.Pending {
		s.pendingSats += p.amount() - s.pending[p.key()].amount()
		s.pending[p.key()] = p
	}
	for _, t := range r.Sent {
		s.sentSats += t.Amount - s.sent[t.key()].Amount
		s.sent[t.key()] = t
	}
	return nil
}

// snapshot is the first record of a journal holding s whole.
func (s *mintState) snapshot() record {
	return record{Version: journalVersion, Mint: s.mint, Proofs: s.held(), Pending: s.pendingOps(),
		Sent: slices.SortedFunc(maps.Values(s.sent), func(a, b sentToken) int { return a.Time.Compare(b.Time) })}
}

// held are the spendable proofs, largest first.
func (s *mintState) held() []cashu.Proof {
	return slices.SortedFunc(maps.Values(s.proofs), func(a, b cashu.Proof) int {
		return cmp.Or(cmp.Compare(b.Amount, a.Amount), cmp.Compare(a.Secret, b.Secret))
	})
}

// pendingOps are the pending operations, oldest first.
func (s *mintState) pendingOps() []pendingOp {
	return slices.SortedFunc(maps.Values(s.pending), func(a, b pendingOp) int { return a.Started.Compare(b.Started) })
}

func (s *mintState) balance() MintBalance {
	return MintBalance{Mint: s.mint, Sats: s.sats, Proofs: len(s.proofs), Pending: s.pendingSats, Sent: s.sentSats}
}
