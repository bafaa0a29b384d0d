package cashu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
)

// domainSeparator prefixes every message hash_to_curve maps (NUT-00), so a
// Cashu point can never collide with one another protocol derives from the
// same bytes.
var domainSeparator = []byte("Secp256k1_HashToCurve_Cashu_")

// ErrInvalidPoint reports a curve point that is not a 33-byte compressed
// secp256k1 point, or an operation whose result is the point at infinity.
var ErrInvalidPoint = errors.New("cashu: invalid curve point")

// HashToCurve maps msg to a point Y on secp256k1 as NUT-00 specifies:
// Y = 02 || SHA256(SHA256(DOMAIN_SEPARATOR || msg) || counter), the counter
// a little-endian uint32 counted up from zero until the x coordinate is on
// the curve. A proof's Y is HashToCurve of its secret's UTF-8 bytes.
func HashToCurve(msg []byte) (*btcec.PublicKey, error) {
	h := sha256.New()
	h.Write(domainSeparator)
	h.Write(msg)
	msgHash := h.Sum(nil)
	var point [33]byte
	point[0] = 0x02
	var counter [4]byte
	for i := uint32(0); i < 1<<16; i++ {
		binary.LittleEndian.PutUint32(counter[:], i)
		h.Reset()
		h.Write(msgHash)
		h.Write(counter[:])
		h.Sum(point[1:1])
		if pk, err := btcec.ParsePubKey(point[:]); err == nil {
			return pk, nil
		}
	}
	// Each try succeeds with probability about one half: 2^16 failures in
	// a row do not happen, but the loop is bounded all the same.
	return nil, fmt.Errorf("%w: hash_to_curve found no point", ErrInvalidPoint)
}

// SecretPoint is Y = HashToCurve(secret): the key a mint files a spent
// proof under (NUT-07) and the point it verifies a signature against.
func SecretPoint(secret string) (*btcec.PublicKey, error) {
	return HashToCurve([]byte(secret))
}

// Blind returns B_ = Y + rG, the blinded message a wallet sends for a
// secret whose point is Y, with blinding factor r.
func Blind(secret string, r *btcec.PrivateKey) (*btcec.PublicKey, error) {
	y, err := SecretPoint(secret)
	if err != nil {
		return nil, err
	}
	return sum(term{p: y}, term{k: &r.Key})
}

// SignBlinded returns the mint's blind signature C_ = kB_.
func SignBlinded(k *btcec.PrivateKey, blinded *btcec.PublicKey) (*btcec.PublicKey, error) {
	return sum(term{k: &k.Key, p: blinded})
}

// Unblind returns C = C_ - rK, the signature on the secret itself, from
// the blind signature C_, the blinding factor r and the mint's key K.
func Unblind(blindSig *btcec.PublicKey, r *btcec.PrivateKey, mintKey *btcec.PublicKey) (*btcec.PublicKey, error) {
	neg := r.Key
	neg.Negate()
	return sum(term{p: blindSig}, term{k: &neg, p: mintKey})
}

// VerifySignature reports whether C = kY for the secret's point Y: how the
// mint checks a proof it is asked to spend.
func VerifySignature(k *btcec.PrivateKey, secret string, c *btcec.PublicKey) bool {
	y, err := SecretPoint(secret)
	if err != nil {
		return false
	}
	ky, err := sum(term{k: &k.Key, p: y})
	return err == nil && ky.IsEqual(c)
}

// ParsePoint parses a hex-encoded 33-byte compressed point, the only form
// the Cashu wire uses; uncompressed and hybrid encodings are refused.
func ParsePoint(s string) (*btcec.PublicKey, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != btcec.PubKeyBytesLenCompressed || (b[0] != 0x02 && b[0] != 0x03) {
		return nil, fmt.Errorf("%w: want 66 hex digits of a compressed point", ErrInvalidPoint)
	}
	pk, err := btcec.ParsePubKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: not on secp256k1", ErrInvalidPoint)
	}
	return pk, nil
}

// PointHex is the wire form of a point: hex of its compressed encoding.
func PointHex(p *btcec.PublicKey) string {
	return hex.EncodeToString(p.SerializeCompressed())
}

// term is one summand kP of a point sum: a nil point stands for the
// generator G, a nil scalar for 1. With a table of P (t), kP is taken
// from it.
type term struct {
	k *btcec.ModNScalar
	p *btcec.PublicKey
	t *KeyTable
}

// sum returns the sum of its terms, refusing the point at infinity: every
// BDHKE and DLEQ equation here is such a sum.
func sum(terms ...term) (*btcec.PublicKey, error) {
	var acc, t, next btcec.JacobianPoint
	for i, tm := range terms {
		switch {
		case tm.p == nil:
			btcec.ScalarBaseMultNonConst(tm.k, &t)
		case tm.k == nil:
			tm.p.AsJacobian(&t)
		default:
			mul(tm.k, tm.p, tm.t, &t)
		}
		if i == 0 {
			acc = t
			continue
		}
		btcec.AddNonConst(&acc, &t, &next)
		acc = next
	}
	return fromJacobian(&acc)
}

// mul sets out to kP, with P's table when there is one.
func mul(k *btcec.ModNScalar, p *btcec.PublicKey, tab *KeyTable, out *btcec.JacobianPoint) {
	if tab != nil {
		tab.mul(k, out)
		return
	}
	var pj btcec.JacobianPoint
	p.AsJacobian(&pj)
	btcec.ScalarMultNonConst(k, &pj, out)
}

// addJacobian returns a + b, refusing the point at infinity.
func addJacobian(a, b *btcec.JacobianPoint) (*btcec.PublicKey, error) {
	var r btcec.JacobianPoint
	btcec.AddNonConst(a, b, &r)
	return fromJacobian(&r)
}

func fromJacobian(p *btcec.JacobianPoint) (*btcec.PublicKey, error) {
	if p.Z.IsZero() || (p.X.IsZero() && p.Y.IsZero()) {
		return nil, fmt.Errorf("%w: point at infinity", ErrInvalidPoint)
	}
	p.ToAffine()
	return btcec.NewPublicKey(&p.X, &p.Y), nil
}
