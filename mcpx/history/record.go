package history

import (
	"encoding/binary"
	"errors"
	"time"
)

// A stored record is: received time (8 bytes, Unix nanoseconds), then id,
// from and each recipient as uvarint-length-prefixed strings (the recipient
// list itself prefixed by its count), then the envelope bytes. The header
// lets queries filter by visibility and age without parsing JSON.

func encodeRecord(buf []byte, r *Record) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(r.Received.UnixNano()))
	buf = appendString(buf, r.ID)
	buf = appendString(buf, r.From)
	buf = binary.AppendUvarint(buf, uint64(len(r.To)))
	for _, t := range r.To {
		buf = appendString(buf, t)
	}
	return append(buf, r.Data...)
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

var errCorrupt = errors.New("history: corrupt record")

// decodeRecord parses a stored record; Data aliases v, which bbolt owns only
// for the transaction: callers copy it to keep it.
func decodeRecord(k, v []byte) (Record, error) {
	var r Record
	if len(k) != 8 || len(v) < 8 {
		return r, errCorrupt
	}
	r.Seq = binary.BigEndian.Uint64(k)
	r.Received = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	rest := v[8:]
	var ok bool
	if r.ID, rest, ok = readString(rest); !ok {
		return r, errCorrupt
	}
	if r.From, rest, ok = readString(rest); !ok {
		return r, errCorrupt
	}
	n, size := binary.Uvarint(rest)
	if size <= 0 || n > uint64(len(rest)) {
		return r, errCorrupt
	}
	rest = rest[size:]
	if n > 0 {
		r.To = make([]string, n)
		for i := range r.To {
			if r.To[i], rest, ok = readString(rest); !ok {
				return r, errCorrupt
			}
		}
	}
	r.Data = rest
	return r, nil
}

func readString(b []byte) (string, []byte, bool) {
	n, size := binary.Uvarint(b)
	if size <= 0 || n > uint64(len(b)-size) {
		return "", nil, false
	}
	return string(b[size : size+int(n)]), b[size+int(n):], true
}

// receivedBefore reports whether the stored record v arrived before t.
func receivedBefore(v []byte, t time.Time) bool {
	return len(v) >= 8 && int64(binary.BigEndian.Uint64(v)) < t.UnixNano()
}
