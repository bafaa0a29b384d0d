package cashu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/btcsuite/btcd/btcec/v2"
)

// ErrKeyset reports a keyset whose keys are malformed or whose id does not
// match them.
var ErrKeyset = errors.New("cashu: invalid keyset")

// keysetVersion is the one keyset id version implemented (NUT-02 "00").
const keysetVersion = "00"

// Keyset is the public side of a keyset (NUT-01, NUT-02): what a wallet
// needs to unblind, verify DLEQ proofs and price inputs.
type Keyset struct {
	ID          string
	Unit        string
	Active      bool
	InputFeePPK uint64
	Keys        map[uint64]*btcec.PublicKey
}

// KeysetID derives a version 00 keyset id (NUT-02): "00" and the first 7
// bytes, hex, of SHA256 over the compressed keys in ascending amount order.
func KeysetID(keys map[uint64]*btcec.PublicKey) string {
	amounts := make([]uint64, 0, len(keys))
	for a := range keys {
		amounts = append(amounts, a)
	}
	slices.Sort(amounts)
	h := sha256.New()
	for _, a := range amounts {
		h.Write(keys[a].SerializeCompressed())
	}
	return keysetVersion + hex.EncodeToString(h.Sum(nil)[:7])
}

// ParseKeys parses the wire keys of a keyset: each amount a power of two,
// each key a compressed point.
func ParseKeys(k Keys) (map[uint64]*btcec.PublicKey, error) {
	out := make(map[uint64]*btcec.PublicKey, len(k))
	for amount, s := range k {
		if !IsPowerOfTwo(amount) {
			return nil, fmt.Errorf("%w: amount %d is not a power of two", ErrKeyset, amount)
		}
		pk, err := ParsePoint(s)
		if err != nil {
			return nil, fmt.Errorf("%w: key of amount %d: %w", ErrKeyset, amount, err)
		}
		out[amount] = pk
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKeyset)
	}
	return out, nil
}

// NewKeyset checks a mint's answer for one keyset: its keys parse and,
// for a version 00 id, derive to the id the mint states.
func NewKeyset(info KeysetInfo, keys Keys) (Keyset, error) {
	pks, err := ParseKeys(keys)
	if err != nil {
		return Keyset{}, err
	}
	if len(info.ID) >= 2 && info.ID[:2] == keysetVersion && KeysetID(pks) != info.ID {
		return Keyset{}, fmt.Errorf("%w: id %s does not match its keys", ErrKeyset, info.ID)
	}
	return Keyset{ID: info.ID, Unit: info.Unit, Active: info.Active, InputFeePPK: info.InputFeePPK, Keys: pks}, nil
}

// WireKeys is the keyset's keys as NUT-01 sends them.
func (k Keyset) WireKeys() Keys {
	out := make(Keys, len(k.Keys))
	for a, pk := range k.Keys {
		out[a] = PointHex(pk)
	}
	return out
}

// InputFees is the fee a mint charges for spending proofs (NUT-02): the
// sum of each input's keyset input_fee_ppk, divided by 1000 and rounded up.
// ppk gives a keyset's input_fee_ppk, false for a keyset it does not know.
func InputFees(proofs []Proof, ppk func(keysetID string) (uint64, bool)) (uint64, error) {
	var total uint64
	for i, p := range proofs {
		fee, ok := ppk(p.ID)
		if !ok {
			return 0, fmt.Errorf("%w: input %d: unknown keyset %q", ErrKeyset, i, p.ID)
		}
		var carry uint64
		if total, carry = bits.Add64(total, fee, 0); carry != 0 {
			return 0, fmt.Errorf("%w: input fees overflow", ErrKeyset)
		}
	}
	return total/1000 + min(total%1000, 1), nil
}
