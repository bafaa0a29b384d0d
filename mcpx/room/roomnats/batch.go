package roomnats

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A JetStream message of the cluster log holds one envelope or a batch of
// them. One envelope: the data is the frame as forwarded, and its seq, id,
// sender, recipients, node and append number are headers (Mcpx-Seq,
// Mcpx-Id, ...). A batch of k envelopes with seqs first..first+k-1: the
// headers are Mcpx-Seq (first), Mcpx-Count (k) and Mcpx-Node (the node
// that appended them all), and the data is k records, each
//
//	uvarint len, id
//	uvarint len, from
//	uvarint n: 0 for no recipients list (a broadcast), else 1 + the
//	           number of recipients, then each as uvarint len, id
//	uvarint len, except
//	uvarint pub (the node's append number)
//	uvarint len, frame
//
// in seq order, with nothing after the last. The whole message shares
// one JetStream timestamp, which is every envelope's Received time.

// hdrCount is the number of envelopes of a batch message.
const hdrCount = "Mcpx-Count"

// batchRecord is one envelope of a batch message.
type batchRecord struct {
	ID     string
	From   string
	To     []string // nil: a broadcast
	Except string
	Pub    uint64
	Frame  []byte
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBatchRecord encodes r at the end of b.
func appendBatchRecord(b []byte, r batchRecord) []byte {
	b = appendString(b, r.ID)
	b = appendString(b, r.From)
	if r.To == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(r.To))+1)
		for _, id := range r.To {
			b = appendString(b, id)
		}
	}
	b = appendString(b, r.Except)
	b = binary.AppendUvarint(b, r.Pub)
	return appendBytes(b, r.Frame)
}

var errBatch = errors.New("mcpx cluster: malformed batch message")

// batchReader reads a batch message's data; it never reads past it.
type batchReader struct {
	b   []byte
	err error
}

func (r *batchReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBatch
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *batchReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errBatch
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

// decodeBatch reads the count records of a batch message's data. The
// frames it returns share data's array.
func decodeBatch(data []byte, count uint64) ([]batchRecord, error) {
	// Every record takes at least 6 bytes: a count larger than that
	// allows is a lie, refused before allocating for it.
	if count == 0 || count > uint64(len(data))/6 {
		return nil, fmt.Errorf("%w: %d envelopes in %d bytes", errBatch, count, len(data))
	}
	r := &batchReader{b: data}
	out := make([]batchRecord, 0, count)
	for range count {
		var rec batchRecord
		rec.ID = string(r.bytes())
		rec.From = string(r.bytes())
		if n := r.uvarint(); n > 0 && r.err == nil {
			if n-1 > uint64(len(r.b)) { // each recipient takes a byte at least
				return nil, errBatch
			}
			rec.To = make([]string, 0, n-1)
			for range n - 1 {
				rec.To = append(rec.To, string(r.bytes()))
			}
		}
		rec.Except = string(r.bytes())
		rec.Pub = r.uvarint()
		rec.Frame = r.bytes()
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, rec)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last envelope", errBatch, len(r.b))
	}
	return out, nil
}
