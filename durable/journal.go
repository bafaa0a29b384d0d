package durable

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"
)

// A journal record is a header, [length uint32][CRC-32C of the payload
// uint32], and the payload: [expires, Unix nanoseconds, int64][space
// length uint8][space][key length uint16][key][value length uint32][value].
// Little-endian. A record whose header or checksum does not check out is a
// torn write at the end of the journal (the process or the machine died
// mid-write), and so is everything after it.
const headerSize = 8

// maxRecordSize bounds a payload: larger is corruption, not a record.
const maxRecordSize = 16 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// entry is one journaled write.
type entry struct {
	space   string
	key     string
	value   []byte
	expires time.Time
}

func appendEntry(buf []byte, e entry) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, headerSize)...)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(e.expires.UnixNano()))
	buf = append(buf, byte(len(e.space)))
	buf = append(buf, e.space...)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(e.key)))
	buf = append(buf, e.key...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(e.value)))
	buf = append(buf, e.value...)
	payload := buf[start+headerSize:]
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, crcTable))
	return buf
}

// checkEntry reports why an entry cannot be journaled, if it cannot.
func checkEntry(e entry) error {
	switch {
	case len(e.space) == 0 || len(e.space) > 255:
		return fmt.Errorf("durable: space name of %d bytes (1 to 255)", len(e.space))
	case len(e.key) > 65535:
		return fmt.Errorf("durable: key of %d bytes (at most 65535)", len(e.key))
	case len(e.value) > maxRecordSize/2:
		return fmt.Errorf("durable: value of %d bytes (at most %d)", len(e.value), maxRecordSize/2)
	}
	return nil
}

var errTorn = errors.New("torn record")

func decodeEntry(payload []byte) (entry, error) {
	var e entry
	if len(payload) < 8+1 {
		return e, errTorn
	}
	e.expires = time.Unix(0, int64(binary.LittleEndian.Uint64(payload)))
	p := payload[8:]
	n := int(p[0])
	p = p[1:]
	if len(p) < n+2 {
		return e, errTorn
	}
	e.space, p = string(p[:n]), p[n:]
	n = int(binary.LittleEndian.Uint16(p))
	p = p[2:]
	if len(p) < n+4 {
		return e, errTorn
	}
	e.key, p = string(p[:n]), p[n:]
	n = int(binary.LittleEndian.Uint32(p))
	p = p[4:]
	if len(p) != n {
		return e, errTorn
	}
	if n > 0 {
		e.value = append([]byte(nil), p...)
	}
	return e, nil
}

// readJournal calls apply for every whole record of the journal at path,
// in order, and returns the offset where the whole records end: anything
// after it is a torn tail.
func readJournal(path string, apply func(entry)) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	var off int64
	var header [headerSize]byte
	for {
		if _, err := io.ReadFull(r, header[:]); err != nil {
			return off, nil // end, or a torn header
		}
		n := binary.LittleEndian.Uint32(header[:])
		if n > maxRecordSize {
			return off, nil
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return off, nil
		}
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(header[4:]) {
			return off, nil
		}
		e, err := decodeEntry(payload)
		if err != nil {
			return off, nil
		}
		apply(e)
		off += headerSize + int64(n)
	}
}
