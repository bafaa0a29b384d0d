package cashu

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
)

// ErrDLEQ reports a DLEQ proof (NUT-12) that does not verify or is
// missing where one is required.
var ErrDLEQ = errors.New("cashu: DLEQ proof does not verify")

// dleqNonceTag prefixes the HMAC input of NUT-12's deterministic nonce.
const dleqNonceTag = "Cashu_DLEQ_R_v1"

// hashE is NUT-12's challenge: SHA256 of the concatenated lowercase hex of
// each point's uncompressed encoding (the hex text, not the bytes).
func hashE(points ...*btcec.PublicKey) [32]byte {
	h := sha256.New()
	buf := make([]byte, 130)
	for _, p := range points {
		hex.Encode(buf, p.SerializeUncompressed())
		h.Write(buf)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// ProveDLEQ proves that C_ = aB_ uses the same a as A = aG, the mint side
// of NUT-12. The nonce r is derived deterministically as NUT-12 asks:
// HMAC-SHA256(a, "Cashu_DLEQ_R_v1" || A || B_ || C_ || ctr) over the
// uncompressed points, ctr counted up while r is zero or not below n, so a
// failing RNG can never leak a through a reused nonce.
func ProveDLEQ(a *btcec.PrivateKey, blinded, blindSig *btcec.PublicKey) (e, s [32]byte, err error) {
	return proveDLEQ(a, a.PubKey(), blinded, blindSig)
}

// proveDLEQ is ProveDLEQ with A = aG known.
func proveDLEQ(a *btcec.PrivateKey, pubA, blinded, blindSig *btcec.PublicKey) (e, s [32]byte, err error) {
	key := a.Serialize()
	mac := hmac.New(sha256.New, key)
	var r btcec.ModNScalar
	found := false
	for ctr := 0; ctr < 256 && !found; ctr++ {
		mac.Reset()
		mac.Write([]byte(dleqNonceTag))
		mac.Write(pubA.SerializeUncompressed())
		mac.Write(blinded.SerializeUncompressed())
		mac.Write(blindSig.SerializeUncompressed())
		mac.Write([]byte{byte(ctr)})
		overflow := r.SetByteSlice(mac.Sum(nil))
		found = !overflow && !r.IsZero()
	}
	if !found {
		return e, s, fmt.Errorf("cashu: no DLEQ nonce in 256 tries")
	}
	r1, err := sum(term{k: &r})
	if err != nil {
		return e, s, err
	}
	r2, err := sum(term{k: &r, p: blinded})
	if err != nil {
		return e, s, err
	}
	e = hashE(r1, r2, pubA, blindSig)
	var es btcec.ModNScalar
	es.SetBytes(&e)
	es.Mul(&a.Key).Add(&r)
	s = es.Bytes()
	return e, s, nil
}

// VerifyDLEQ checks a DLEQ proof (e, s) that C_ = aB_ for A = aG, the
// wallet side of NUT-12: R1 = sG - eA, R2 = sB_ - eC_, e == hash(R1, R2, A, C_).
func VerifyDLEQ(pubA, blinded, blindSig *btcec.PublicKey, e, s [32]byte) error {
	var es, ss btcec.ModNScalar
	if es.SetBytes(&e) != 0 || ss.SetBytes(&s) != 0 {
		return fmt.Errorf("%w: e or s is not below the curve order", ErrDLEQ)
	}
	es.Negate()
	r1, err := sum(term{k: &ss}, term{k: &es, p: pubA})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDLEQ, err)
	}
	r2, err := sum(term{k: &ss, p: blinded}, term{k: &es, p: blindSig})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDLEQ, err)
	}
	if got := hashE(r1, r2, pubA, blindSig); !hmac.Equal(got[:], e[:]) {
		return ErrDLEQ
	}
	return nil
}

// verifyAndUnblind is VerifyDLEQ of the mint's signature C_ on the
// blinded message B_ under its key A, then Unblind: C = C_ - rA. Of its
// five multiplications the two by arbitrary points (sB_, eC_) cost most;
// one of them, with rA, runs on a goroutine of its own while this one
// does the rest. A wallet waits on this before it can use what it was
// paid (a gateway, before it runs a paid call), and a machine has a
// core to spare more often than not: on two idle cores it takes about
// half the time.
func verifyAndUnblind(pubA *btcec.PublicKey, tab *KeyTable, blinded, blindSig *btcec.PublicKey, r *btcec.PrivateKey, e, s [32]byte) (*btcec.PublicKey, error) {
	var es, ss btcec.ModNScalar
	if es.SetBytes(&e) != 0 || ss.SetBytes(&s) != 0 {
		return nil, fmt.Errorf("%w: e or s is not below the curve order", ErrDLEQ)
	}
	es.Negate()
	negR := r.Key
	negR.Negate()
	var sB, rA btcec.JacobianPoint
	done := make(chan struct{})
	go func() {
		defer close(done)
		mul(&ss, blinded, nil, &sB)
		mul(&negR, pubA, tab, &rA)
	}()
	r1, err := sum(term{k: &ss}, term{k: &es, p: pubA, t: tab})
	var eC btcec.JacobianPoint
	mul(&es, blindSig, nil, &eC)
	<-done
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDLEQ, err)
	}
	r2, err := addJacobian(&sB, &eC)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDLEQ, err)
	}
	if got := hashE(r1, r2, pubA, blindSig); !hmac.Equal(got[:], e[:]) {
		return nil, ErrDLEQ
	}
	var cb btcec.JacobianPoint
	blindSig.AsJacobian(&cb)
	return addJacobian(&cb, &rA)
}

// parseScalarHex reads a 32-byte hex scalar of a DLEQ proof.
func parseScalarHex(s string) ([32]byte, error) {
	var out [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return out, fmt.Errorf("%w: want 64 hex digits", ErrDLEQ)
	}
	copy(out[:], b)
	return out, nil
}
