package wallet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
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
	c      *Client
	cache  *keyCache
	cached bool // infos came from the cache, not the mint, for this operation
	infos  map[string]cashu.KeysetInfo
	keys   map[string]cashu.Keyset
}

// infoTTL is how long a mint's keyset infos are used without asking it
// again: a process serving many payments (a gateway) spares a request per
// operation, and a keyset the mint rotated in meanwhile is found when a
// proof or output names it.
const infoTTL = 30 * time.Second

// keyCache is what a Wallet remembers of mints' keysets between
// operations: the infos for infoTTL, and the keys for good, since a
// keyset's keys are checked against its id and never change.
type keyCache struct {
	mu     sync.Mutex
	mints  map[string]*mintKeys
	tables map[string]*keyTable // by compressed key
}

// keyTable is one key's table (cashu.KeyTable), once it has been used
// enough to be worth building.
type keyTable struct {
	uses  int
	table *cashu.KeyTable
}

// tableAfter is how many signatures of one key a wallet unblinds before
// it builds the key's table, which makes each further one about a third
// cheaper for the cost of two or three: a process that receives many (a
// gateway paid in ecash) gets the faster unblinding, one that receives a
// handful (cvm cashu send) does not pay for it.
const tableAfter = 2

// table is key's table, nil until key has been asked for tableAfter
// times (the asking that reaches it builds it).
func (c *keyCache) table(key *btcec.PublicKey) *cashu.KeyTable {
	id := string(key.SerializeCompressed())
	c.mu.Lock()
	if c.tables == nil {
		c.tables = map[string]*keyTable{}
	}
	kt := c.tables[id]
	if kt == nil {
		kt = &keyTable{}
		c.tables[id] = kt
	}
	kt.uses++
	t, build := kt.table, kt.table == nil && kt.uses >= tableAfter
	c.mu.Unlock()
	if !build {
		return t
	}
	t = cashu.NewKeyTable(key) // outside the lock: a few milliseconds
	c.mu.Lock()
	kt.table = t
	c.mu.Unlock()
	return t
}

type mintKeys struct {
	infos   map[string]cashu.KeysetInfo
	fetched time.Time
	keys    map[string]cashu.Keyset
}

func loadKeyring(ctx context.Context, c *Client, cache *keyCache) (*keyring, error) {
	k := &keyring{c: c, cache: cache, infos: map[string]cashu.KeysetInfo{}, keys: map[string]cashu.Keyset{}}
	cache.mu.Lock()
	if m := cache.mints[c.URL()]; m != nil {
		maps.Copy(k.keys, m.keys)
		if time.Since(m.fetched) < infoTTL {
			maps.Copy(k.infos, m.infos)
			k.cached = true
		}
	}
	cache.mu.Unlock()
	if k.cached {
		return k, nil
	}
	return k, k.fetchInfos(ctx)
}

// fetchInfos asks the mint for its keysets' infos, and remembers them.
func (k *keyring) fetchInfos(ctx context.Context) error {
	resp, err := k.c.Keysets(ctx)
	if err != nil {
		return err
	}
	k.infos, k.cached = map[string]cashu.KeysetInfo{}, false
	for _, ks := range resp.Keysets {
		k.infos[ks.ID] = ks
	}
	k.cache.mu.Lock()
	defer k.cache.mu.Unlock()
	m := k.cache.mints[k.c.URL()]
	if m == nil {
		m = &mintKeys{keys: map[string]cashu.Keyset{}}
		k.cache.mints[k.c.URL()] = m
	}
	m.infos, m.fetched = maps.Clone(k.infos), time.Now()
	return nil
}

// remember keeps a keyset's checked keys for later operations.
func (k *keyring) remember(ks cashu.Keyset) {
	k.keys[ks.ID] = ks
	k.cache.mu.Lock()
	defer k.cache.mu.Unlock()
	if m := k.cache.mints[k.c.URL()]; m != nil {
		m.keys[ks.ID] = ks
	}
}

// keyset returns the keys of keyset id, which must be in Unit.
func (k *keyring) keyset(ctx context.Context, id string) (cashu.Keyset, error) {
	if ks, ok := k.keys[id]; ok {
		return ks, nil
	}
	info, ok := k.infos[id]
	if !ok && k.cached { // a keyset the mint made after the infos were cached?
		if err := k.fetchInfos(ctx); err != nil {
			return cashu.Keyset{}, err
		}
		info, ok = k.infos[id]
	}
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
			k.remember(ks)
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
		if tab := k.cache.table(key); tab != nil {
			proofs[i], err = o.ProofWith(sigs[i], tab)
		} else {
			proofs[i], err = o.Proof(sigs[i], key)
		}
		if err != nil {
			return nil, fmt.Errorf("cashu mint %s: signature %d: %w", k.c.URL(), i, err)
		}
	}
	return proofs, nil
}
