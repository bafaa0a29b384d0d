package channel

import (
	"encoding/binary"
	"fmt"
	"time"
)

// record is a channel as the store keeps it: its state, its client, the
// funding payments applied (so that a top-up is applied once), and its
// refund's invoice and preimage. One record per channel, written whole with
// one Put: every change to a channel is atomic.
type record struct {
	State
	Client   []byte
	Funding  [][32]byte
	Invoice  string
	Preimage string
}

// recordVersion is the first byte of an encoded record; another is refused.
const recordVersion = 1

// maxFunding bounds the funding payments of one channel (its open and
// top-ups), and so the size of its record, rewritten with every receipt.
const maxFunding = 256

func (r *record) encode() []byte {
	b := make([]byte, 0, 128+len(r.Ref)+len(r.Client)+len(r.Fragment)+32*len(r.Funding)+len(r.Invoice)+len(r.Preimage))
	b = append(b, recordVersion, boolByte(r.Closed), byte(r.Refund))
	b = append(b, r.Channel[:]...)
	for _, v := range []uint64{r.Epoch, r.Deposit, r.Accumulated, r.Nonce, r.Owed} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	for _, t := range []time.Time{r.Opened, r.LastUse, r.ClosedAt} {
		b = binary.LittleEndian.AppendUint64(b, uint64(unixNano(t)))
	}
	b = appendBytes(b, []byte(r.Fragment))
	b = appendBytes(b, r.Client)
	b = binary.AppendUvarint(b, uint64(len(r.Funding)))
	for _, h := range r.Funding {
		b = append(b, h[:]...)
	}
	b = appendBytes(b, []byte(r.Invoice))
	b = appendBytes(b, []byte(r.Preimage))
	return appendBytes(b, []byte(r.Ref))
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOf(n uint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// decoder reads what encode appends; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil || uint64(len(d.b)) < n {
		d.err = fmt.Errorf("channel: stored record is cut short")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = fmt.Errorf("channel: stored record has a bad length")
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) bytes() []byte { return d.take(d.uvarint()) }

func decodeRecord(b []byte) (*record, error) {
	d := decoder{b: b}
	head := d.take(3)
	if d.err == nil && head[0] != recordVersion {
		return nil, fmt.Errorf("channel: stored record of version %d, want %d", head[0], recordVersion)
	}
	r := &record{}
	if d.err == nil {
		r.Closed, r.Refund = head[1] == 1, RefundStatus(head[2])
	}
	copy(r.Channel[:], d.take(32))
	r.Epoch, r.Deposit, r.Accumulated, r.Nonce, r.Owed = d.u64(), d.u64(), d.u64(), d.u64(), d.u64()
	r.Opened, r.LastUse, r.ClosedAt = timeOf(d.u64()), timeOf(d.u64()), timeOf(d.u64())
	r.Fragment = string(d.bytes())
	r.Client = append([]byte(nil), d.bytes()...)
	n := d.uvarint()
	if n > maxFunding {
		return nil, fmt.Errorf("channel: stored record lists %d funding payments", n)
	}
	r.Funding = make([][32]byte, n)
	for i := range r.Funding {
		copy(r.Funding[i][:], d.take(32))
	}
	r.Invoice = string(d.bytes())
	r.Preimage = string(d.bytes())
	r.Ref = string(d.bytes())
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}
