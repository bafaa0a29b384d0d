package cashu

import "math/bits"

// SplitAmount splits an amount into the powers of two a keyset signs,
// smallest first: 13 is 1, 4, 8. Zero splits into nothing.
func SplitAmount(amount uint64) []uint64 {
	out := make([]uint64, 0, bits.OnesCount64(amount))
	for amount != 0 {
		low := amount & -amount
		out = append(out, low)
		amount &^= low
	}
	return out
}

// IsPowerOfTwo reports whether amount is one a keyset can sign.
func IsPowerOfTwo(amount uint64) bool {
	return amount != 0 && amount&(amount-1) == 0
}

// SumProofs is the total amount of proofs, and false if it overflows.
func SumProofs(proofs []Proof) (uint64, bool) {
	return total(proofs, func(p Proof) uint64 { return p.Amount })
}

// SumOutputs is the total amount of outputs, and false if it overflows.
func SumOutputs(outputs []BlindedMessage) (uint64, bool) {
	return total(outputs, func(o BlindedMessage) uint64 { return o.Amount })
}

func total[T any](items []T, amount func(T) uint64) (uint64, bool) {
	var sum uint64
	for _, it := range items {
		var carry uint64
		if sum, carry = bits.Add64(sum, amount(it), 0); carry != 0 {
			return 0, false
		}
	}
	return sum, true
}
