package mint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/cvmgo/cvm/payments/cashu"
)

// Spaces of the durable store. A claim space's records are the guard
// (durable.Store.Claim: exactly one request wins a key); its owner space
// names, by a digest of the request, who won, so that the same request
// sent again (a lost answer, a mint restarted mid-request) is answered
// again rather than refused. Answering again is safe because signing is
// deterministic: the same blinded messages get the same signatures.
const (
	spaceSpent   = "cashu-spent"   // proof Y (33 bytes): spent or pending
	spaceSigned  = "cashu-signed"  // blinded message B_ (33 bytes): signed
	spaceIssued  = "cashu-issued"  // mint quote id: its ecash issued
	ownerSuffix  = "-owner"        // + claim space: key -> request digest
	spacePending = "cashu-pending" // proof Y -> melt quote id, while it pays
	spaceMintQ   = "cashu-mintquote"
	spaceMeltQ   = "cashu-meltquote"
)

// forever is the expiry of a record that must never lapse (a spent
// secret): a century, which every store represents.
func (m *Mint) forever() time.Time { return m.now().AddDate(100, 0, 0) }

// gone is an expiry in the past: a Put with it makes a record absent.
var gone = time.Unix(1, 0)

type claimKey struct {
	space string
	key   []byte
}

// digest identifies a request by its kind, its quote (if any), what it
// claims and the outputs it asks signed (amounts included: a blank
// output's amount is the mint's to set, but the same request sends the
// same).
func digest(op, quote string, keys []claimKey, outs []cashu.BlindedMessage) []byte {
	h := sha256.New()
	field := func(s string) {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
		h.Write([]byte(s))
	}
	field(op)
	field(quote)
	for _, k := range keys {
		field(k.space)
		field(string(k.key))
	}
	for _, o := range outs {
		field(strconv.FormatUint(o.Amount, 10))
		field(o.ID)
		field(o.B)
	}
	return h.Sum(nil)
}

// claimAll claims every key for the request with digest d, or none: on the
// first key another request holds, the keys claimed so far are released
// and its index returned. A key this same request claimed before counts
// as claimed. The caller holds m.mu, which makes "is it claimed, who by,
// claim it" one step for the requests of this process; across processes
// sharing a store, Claim alone still lets exactly one win.
func (m *Mint) claimAll(ctx context.Context, keys []claimKey, d []byte) (conflict int, err error) {
	var held []claimKey
	fail := func(i int, err error) (int, error) {
		return i, m.releaseAll(ctx, held, err)
	}
	for i, k := range keys {
		owner, claimed, err := m.owner(ctx, k)
		if err != nil {
			return fail(-1, err)
		}
		if claimed {
			if !bytes.Equal(owner, d) {
				return fail(i, nil)
			}
			held = append(held, k)
			continue
		}
		// Owner first: a crash between the two writes leaves an owner
		// record and no claim, which is as good as no claim.
		if err := m.st.Put(ctx, k.space+ownerSuffix, k.key, d, m.forever()); err != nil {
			return fail(-1, err)
		}
		ok, err := m.st.Claim(ctx, k.space, k.key, m.forever())
		if err != nil {
			return fail(-1, err)
		}
		if !ok {
			return fail(i, nil)
		}
		held = append(held, k)
	}
	return -1, nil
}

// owner reports whether key is claimed, and the digest of the request
// that claimed it.
func (m *Mint) owner(ctx context.Context, k claimKey) ([]byte, bool, error) {
	_, claimed, err := m.st.Get(ctx, k.space, k.key)
	if err != nil || !claimed {
		return nil, false, err
	}
	owner, _, err := m.st.Get(ctx, k.space+ownerSuffix, k.key)
	return owner, true, err
}

// releaseAll makes the claims absent again (a request that lost a race, a
// melt whose payment failed), and returns cause, or the first error.
func (m *Mint) releaseAll(ctx context.Context, keys []claimKey, cause error) error {
	for _, k := range keys {
		if err := m.st.Put(ctx, k.space, k.key, nil, gone); err != nil && cause == nil {
			cause = err
		}
	}
	return cause
}

// claim claims keys for the request with digest d and, holding m.mu,
// runs then (a state change that goes with the claims; nil for none). A
// lost claim is the request's error (conflictError).
func (m *Mint) claim(ctx context.Context, keys []claimKey, d []byte, then func() error) error {
	m.mu.Lock()
	conflict, err := m.claimAll(ctx, keys, d)
	if err == nil && conflict < 0 && then != nil {
		err = then()
	}
	m.mu.Unlock()
	if err != nil {
		return internal("claiming", err)
	}
	if conflict >= 0 {
		return m.conflictError(ctx, keys[conflict], conflict)
	}
	return nil
}
