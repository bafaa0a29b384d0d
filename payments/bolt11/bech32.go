package bolt11

import (
	"errors"
	"fmt"
	"strings"
)

// bech32 as BIP-173 defines it, without its 90-character limit (BOLT 11
// invoices are longer).

const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

var charsetRev = func() (rev [128]int8) {
	for i := range rev {
		rev[i] = -1
	}
	for i, c := range charset {
		rev[c] = int8(i)
	}
	return rev
}()

func polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		b := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if (b>>uint(i))&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

func hrpExpand(hrp string) []byte {
	out := make([]byte, 0, len(hrp)*2+1)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]&31)
	}
	return out
}

func checksum(hrp string, data []byte) []byte {
	values := append(hrpExpand(hrp), data...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := polymod(values) ^ 1
	out := make([]byte, 6)
	for i := range out {
		out[i] = byte(mod>>uint(5*(5-i))) & 31
	}
	return out
}

// bech32Encode encodes hrp and 5-bit words, lower case.
func bech32Encode(hrp string, data []byte) string {
	var b strings.Builder
	b.Grow(len(hrp) + 1 + len(data) + 6)
	b.WriteString(hrp)
	b.WriteByte('1')
	for _, w := range data {
		b.WriteByte(charset[w])
	}
	for _, w := range checksum(hrp, data) {
		b.WriteByte(charset[w])
	}
	return b.String()
}

// bech32Decode splits s into its human-readable part and its 5-bit words,
// checking the character set, the case and the checksum.
func bech32Decode(s string) (hrp string, data []byte, err error) {
	lower, upper := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 33 || c > 126:
			return "", nil, fmt.Errorf("character %d is not printable ASCII", i)
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		}
	}
	if lower && upper {
		return "", nil, errors.New("mixed upper and lower case")
	}
	s = strings.ToLower(s)
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 {
		return "", nil, errors.New("no separator '1' after a human-readable part")
	}
	if len(s)-sep-1 < 6 {
		return "", nil, errors.New("too short for a checksum")
	}
	hrp = s[:sep]
	data = make([]byte, 0, len(s)-sep-1)
	for i := sep + 1; i < len(s); i++ {
		v := charsetRev[s[i]]
		if v < 0 {
			return "", nil, fmt.Errorf("character %q is not in the bech32 alphabet", s[i])
		}
		data = append(data, byte(v))
	}
	if polymod(append(hrpExpand(hrp), data...)) != 1 {
		return "", nil, errors.New("bad bech32 checksum")
	}
	return hrp, data[:len(data)-6], nil
}

// convertBits regroups bits from groups of from into groups of to. With
// pad, a last partial group is zero-padded; without, leftover bits must be
// fewer than from and zero.
func convertBits(data []byte, from, to uint, pad bool) ([]byte, error) {
	var acc uint32
	var bits uint
	maxv := uint32(1)<<to - 1
	out := make([]byte, 0, len(data)*int(from)/int(to)+1)
	for _, v := range data {
		if uint32(v)>>from != 0 {
			return nil, fmt.Errorf("value %d does not fit in %d bits", v, from)
		}
		acc = acc<<from | uint32(v)
		bits += from
		for bits >= to {
			bits -= to
			out = append(out, byte(acc>>bits&maxv))
		}
	}
	if pad {
		if bits > 0 {
			out = append(out, byte(acc<<(to-bits)&maxv))
		}
	} else if bits >= from || acc<<(to-bits)&maxv != 0 {
		return nil, errors.New("non-zero padding bits")
	}
	return out, nil
}
