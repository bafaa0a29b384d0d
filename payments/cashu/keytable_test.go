package cashu

import (
	"bytes"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
)

// kP by btcec's multiplication, affine, for comparison.
func mulPlain(k *btcec.ModNScalar, p *btcec.PublicKey) btcec.JacobianPoint {
	var pj, out btcec.JacobianPoint
	p.AsJacobian(&pj)
	btcec.ScalarMultNonConst(k, &pj, &out)
	if !out.Z.IsZero() {
		out.ToAffine()
	}
	return out
}

func mulTable(t *KeyTable, k *btcec.ModNScalar) btcec.JacobianPoint {
	var out btcec.JacobianPoint
	t.mul(k, &out)
	if !out.Z.IsZero() {
		out.ToAffine()
	}
	return out
}

func samePoint(a, b btcec.JacobianPoint) bool {
	if a.Z.IsZero() || b.Z.IsZero() {
		return a.Z.IsZero() && b.Z.IsZero()
	}
	return a.X.Equals(&b.X) && a.Y.Equals(&b.Y)
}

func scalarHex(t testing.TB, s string) *btcec.ModNScalar {
	var k btcec.ModNScalar
	if k.SetByteSlice(mustHex(t, s)) {
		t.Fatalf("%s overflows", s)
	}
	return &k
}

// The table's multiplication is btcec's: random scalars, and those whose
// hex digits are all zero, all 15, or single, at both ends.
func TestKeyTable_MultipliesAsBtcec(t *testing.T) {
	key, _ := btcec.NewPrivateKey()
	tab := NewKeyTable(key.PubKey())
	scalars := []*btcec.ModNScalar{
		scalarHex(t, "00"),
		scalarHex(t, "01"),
		scalarHex(t, "0f"),
		scalarHex(t, "10"),
		scalarHex(t, "f0"+strings.Repeat("00", 31)),
		scalarHex(t, "10"+strings.Repeat("00", 31)),
		scalarHex(t, strings.Repeat("ff", 16)),
		scalarHex(t, "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140"), // n-1
		scalarHex(t, strings.Repeat("0f", 32)),
	}
	for range 64 {
		r, _ := btcec.NewPrivateKey()
		scalars = append(scalars, &r.Key)
	}
	for _, k := range scalars {
		if got, want := mulTable(tab, k), mulPlain(k, key.PubKey()); !samePoint(got, want) {
			b := k.Bytes()
			t.Fatalf("k = %x: the table's kP differs from btcec's", b[:])
		}
	}
	if !tab.Key().IsEqual(key.PubKey()) {
		t.Fatal("the table is not of its key")
	}
}

// A proof unblinded with the key's table is the one unblinded without,
// and a signature that does not verify is refused either way.
func TestOutput_ProofWithTableIsProof(t *testing.T) {
	k, _ := btcec.NewPrivateKey()
	tab := NewKeyTable(k.PubKey())
	outs, err := NewOutputs("009a1f293253e41e", []uint64{1, 2, 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		sig, err := SignOutput(k, o.Message)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := o.Proof(sig, k.PubKey())
		if err != nil {
			t.Fatal(err)
		}
		fast, err := o.ProofWith(sig, tab)
		if err != nil || fast.C != plain.C || *fast.DLEQ != *plain.DLEQ {
			t.Fatalf("with the table: %+v, %v; without: %+v", fast, err, plain)
		}
		bad := sig
		d := *sig.DLEQ
		d.S = d.E
		bad.DLEQ = &d
		if _, err := o.ProofWith(bad, tab); err == nil {
			t.Fatal("a signature whose DLEQ proof is wrong was unblinded with the table")
		}
		other := NewKeyTable(mustOtherKey(t))
		if _, err := o.ProofWith(sig, other); err == nil {
			t.Fatal("a signature was accepted under another key's table")
		}
	}
}

func mustOtherKey(t *testing.T) *btcec.PublicKey {
	t.Helper()
	k, err := btcec.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PubKey()
}

func FuzzKeyTableMul(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0xff}, 32))
	f.Add([]byte{1})
	key, _ := btcec.NewPrivateKey()
	tab := NewKeyTable(key.PubKey())
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 32 {
			b = b[:32]
		}
		var k btcec.ModNScalar
		k.SetByteSlice(b)
		if !samePoint(mulTable(tab, &k), mulPlain(&k, key.PubKey())) {
			t.Fatalf("k = %x: the table's kP differs from btcec's", b)
		}
	})
}

// The wallet's side of one signature: its DLEQ proof verified and the
// signature unblinded, by plain multiplications and with the key's table.
func BenchmarkProof(b *testing.B) {
	k, _ := btcec.NewPrivateKey()
	outs, err := NewOutputs("009a1f293253e41e", []uint64{1})
	if err != nil {
		b.Fatal(err)
	}
	sig, err := SignOutput(k, outs[0].Message)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, err := outs[0].Proof(sig, k.PubKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
	tab := NewKeyTable(k.PubKey())
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			if _, err := outs[0].ProofWith(sig, tab); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			NewKeyTable(k.PubKey())
		}
	})
}
