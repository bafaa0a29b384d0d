package mint

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/payments/cashu"
)

// keysetAmounts is how many powers of two the keyset signs: 1 to 2^31
// sats (some 21 bitcoin in one proof). 2^31 keeps every amount a safe
// JavaScript number, which cashu-ts and other wallets may still assume.
const keysetAmounts = 32

// MinSeedLen is the shortest seed accepted: 32 bytes, the strength of one
// secp256k1 key.
const MinSeedLen = 32

// keyset is the mint's one keyset: its public side and the private key of
// each amount.
type keyset struct {
	pub  cashu.Keyset
	priv map[uint64]*btcec.PrivateKey
}

// deriveKeyset derives the keyset of unit from the seed: the key of
// amount a is HMAC-SHA256(seed, "cvm-mint-sim/v1/" || unit || "/" || a ||
// try), the first try that is a valid scalar. The same seed gives the same
// keyset, so proofs outlive a restart; input_fee_ppk is not part of it, so
// changing the fee keeps the keyset id (the fee applies from then on).
func deriveKeyset(seed []byte, unit string, inputFeePPK uint64) (keyset, error) {
	if len(seed) < MinSeedLen {
		return keyset{}, fmt.Errorf("mint: seed of %d bytes, want at least %d", len(seed), MinSeedLen)
	}
	ks := keyset{priv: map[uint64]*btcec.PrivateKey{}}
	pubs := map[uint64]*btcec.PublicKey{}
	mac := hmac.New(sha256.New, seed)
	for i := range keysetAmounts {
		amount := uint64(1) << i
		var k btcec.ModNScalar
		for try := byte(0); ; try++ {
			mac.Reset()
			mac.Write([]byte("cvm-mint-sim/v1/" + unit + "/"))
			mac.Write(binary.BigEndian.AppendUint64(nil, amount))
			mac.Write([]byte{try})
			if overflow := k.SetByteSlice(mac.Sum(nil)); !overflow && !k.IsZero() {
				break
			}
		}
		priv := btcec.PrivKeyFromScalar(&k)
		ks.priv[amount] = priv
		pubs[amount] = priv.PubKey()
	}
	ks.pub = cashu.Keyset{ID: cashu.KeysetID(pubs), Unit: unit, Active: true, InputFeePPK: inputFeePPK, Keys: pubs}
	return ks, nil
}

func (k keyset) info() cashu.KeysetInfo {
	return cashu.KeysetInfo{ID: k.pub.ID, Unit: k.pub.Unit, Active: true, InputFeePPK: k.pub.InputFeePPK}
}
