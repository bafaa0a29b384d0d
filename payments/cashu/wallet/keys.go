package wallet

import (
	"context"
	"errors"
	"fmt"

	"github.com/cvmgo/cvm/payments/cashu"
)

// Unit is the one unit this wallet holds.
const Unit = "sat"

// ErrKeyset reports a proof of a keyset the mint does not have in Unit.
var ErrKeyset = errors.New("cashu wallet: keyset unknown to the mint, or not in sats")

// keyring is what the wallet knows of a mint's keysets during one
// operation: their infos (fees, unit, active) from /v1/keysets, and the
// keys of those it used, each checked against its id.
type keyring struct {
	c     *Client
	infos map[string]cashu.KeysetInfo
	keys  map[string]cashu.Keyset
}

func loadKeyring(ctx context.Context, c *Client) (*keyring, error) {
	resp, err := c.Keysets(ctx)
	if err != nil {
		return nil, err
	}
	k := &keyring{c: c, infos: map[string]cashu.KeysetInfo{}, keys: map[string]cashu.Keyset{}}
	for _, ks := range resp.Keysets {
		k.infos[ks.ID] = ks
	}
	return k, nil
}

// keyset returns the keys of keyset id, which must be in Unit.
func (k *keyring) keyset(ctx context.Context, id string) (cashu.Keyset, error) {
	if ks, ok := k.keys[id]; ok {
		return ks, nil
	}
	info, ok := k.infos[id]
	if !ok || info.Unit != Unit {
		return cashu.Keyset{}, fmt.Errorf("%w: %q", ErrKeyset, id)
	}
	resp, err := k.c.Keys(ctx, id)
	if err != nil {
		return cashu.Keyset{}, err
	}
	for _, kk := range resp.Keysets {
		if kk.ID == id {
			ks, err := cashu.NewKeyset(info, kk.Keys)
			if err != nil {
				return cashu.Keyset{}, err
			}
			k.keys[id] = ks
			return ks, nil
		}
	}
	return cashu.Keyset{}, fmt.Errorf("%w: the mint sent no keys for %q", ErrKeyset, id)
}

// active is the keyset new outputs go to: an active one in Unit, the one
// with the lowest input fee.
func (k *keyring) active(ctx context.Context) (cashu.Keyset, error) {
	var best *cashu.KeysetInfo
	for _, info := range k.infos {
		if info.Active && info.Unit == Unit && (best == nil || info.InputFeePPK < best.InputFeePPK || info.InputFeePPK == best.InputFeePPK && info.ID < best.ID) {
			best = &info
		}
	}
	if best == nil {
		return cashu.Keyset{}, fmt.Errorf("cashu mint %s has no active keyset in %s", k.c.URL(), Unit)
	}
	return k.keyset(ctx, best.ID)
}

// fees is the input fee of spending proofs (NUT-02).
func (k *keyring) fees(proofs []cashu.Proof) (uint64, error) {
	return cashu.InputFees(proofs, func(id string) (uint64, bool) {
		info, ok := k.infos[id]
		return info.InputFeePPK, ok
	})
}

// unblind turns the mint's signatures on outputs into proofs, each DLEQ
// proof verified (NUT-12) against the key of its keyset and amount.
func (k *keyring) unblind(ctx context.Context, outputs []cashu.Output, sigs []cashu.BlindSignature) ([]cashu.Proof, error) {
	if len(sigs) != len(outputs) {
		return nil, fmt.Errorf("cashu mint %s answered %d outputs with %d signatures", k.c.URL(), len(outputs), len(sigs))
	}
	proofs := make([]cashu.Proof, len(outputs))
	for i, o := range outputs {
		ks, err := k.keyset(ctx, o.Message.ID)
		if err != nil {
			return nil, err
		}
		key, ok := ks.Keys[o.Message.Amount]
		if !ok {
			return nil, fmt.Errorf("%w: keyset %s has no key for %d", ErrKeyset, o.Message.ID, o.Message.Amount)
		}
		if proofs[i], err = o.Proof(sigs[i], key); err != nil {
			return nil, fmt.Errorf("cashu mint %s: signature %d: %w", k.c.URL(), i, err)
		}
	}
	return proofs, nil
}
