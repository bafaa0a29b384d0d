package wallet

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/cvmgo/cvm/payments/cashu"
)

// journalVersion is the version of the proof file's format: a journal of
// records (version 1 was one JSON document, rewritten whole).
const journalVersion = 2

// record is one line of a proof file: a change to the mint's proofs. The
// first record of a file is the whole state (Version and Mint set, and
// every proof, pending operation and sent token added); each later one is
// what one save of an operation changed. Applying a record removes by key
// first, then adds by key (a proof's secret, a pending operation's first
// output, a sent token's first proof's secret), so a record applied twice
// changes nothing and a replay is exact.
type record struct {
	Version int    `json:"v,omitempty"`
	Mint    string `json:"mint,omitempty"`
	// Removed from each set.
	Spent  []string `json:"spent,omitempty"`
	Done   []string `json:"done,omitempty"`
	Unsent []string `json:"unsent,omitempty"`
	// Added to each set, whole.
	Proofs  []cashu.Proof `json:"proofs,omitempty"`
	Pending []pendingOp   `json:"pending,omitempty"`
	Sent    []sentToken   `json:"sent,omitempty"`
}

func (r *record) empty() bool {
	return len(r.Spent)+len(r.Done)+len(r.Unsent)+len(r.Proofs)+len(r.Pending)+len(r.Sent) == 0
}

// sentToken is a token handed out of the wallet: its proofs leave the
// spendable ones before it is delivered, so that a crash never leaves
// them there to be sent twice, and stay here, in case it was not taken,
// until the mint says they are spent (see (*op).compact).
type sentToken struct {
	Amount uint64        `json:"amount"`
	Time   time.Time     `json:"time"`
	Proofs []cashu.Proof `json:"proofs"`
}

func (s sentToken) key() string { return s.Proofs[0].Secret }

// A record's line: {"crc":"%08x","rec":RECORD}\n, the checksum (CRC-32C)
// of RECORD's bytes as written. Each line is JSON, and the file JSON Lines.
const (
	linePrefix = `{"crc":"`
	lineMid    = `","rec":`
	lineEnd    = "}\n"
	crcLen     = 8
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports a proof file with a damaged record before its last:
// not the tail a crash mid-append leaves, which is cut off.
var ErrCorrupt = errors.New("cashu wallet: the proof file is damaged")

// encodeRecord is r's line.
func encodeRecord(r record) ([]byte, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	line := make([]byte, 0, len(linePrefix)+crcLen+len(lineMid)+len(payload)+len(lineEnd))
	line = append(line, linePrefix...)
	line = hex.AppendEncode(line, binary.BigEndian.AppendUint32(nil, crc32.Checksum(payload, crcTable)))
	line = append(line, lineMid...)
	line = append(line, payload...)
	return append(line, lineEnd...), nil
}

// isJournal says whether data, a proof file's start, is a journal.
func isJournal(data []byte) bool { return bytes.HasPrefix(data, []byte(linePrefix)) }

// parseRecords reads the records of data, a part of a proof file that
// starts at a record. It returns them and the length of data they take:
// less than len(data) when its last line is incomplete or does not check
// out (torn: a write cut short by a crash or a power loss, or still
// under way in another process). A bad line with others after it is
// ErrCorrupt.
func parseRecords(data []byte) ([]record, int, error) {
	var recs []record
	n := 0
	for n < len(data) {
		end := bytes.IndexByte(data[n:], '\n')
		if end < 0 {
			return recs, n, nil // the last line, incomplete
		}
		line := data[n : n+end+1]
		r, err := parseLine(line)
		if err != nil {
			if n+len(line) == len(data) {
				return recs, n, nil // the last line: torn
			}
			return nil, 0, fmt.Errorf("%w: the record at byte %d: %w", ErrCorrupt, n, err)
		}
		recs = append(recs, r)
		n += len(line)
	}
	return recs, n, nil
}

func parseLine(line []byte) (record, error) {
	var r record
	head := len(linePrefix) + crcLen + len(lineMid)
	if len(line) < head+len(lineEnd) || !bytes.HasPrefix(line, []byte(linePrefix)) ||
		!bytes.HasPrefix(line[len(linePrefix)+crcLen:], []byte(lineMid)) || !bytes.HasSuffix(line, []byte(lineEnd)) {
		return r, errors.New("not a record")
	}
	var sum [4]byte
	if _, err := hex.Decode(sum[:], line[len(linePrefix):len(linePrefix)+crcLen]); err != nil {
		return r, errors.New("a malformed checksum")
	}
	payload := line[head : len(line)-len(lineEnd)]
	if crc32.Checksum(payload, crcTable) != binary.BigEndian.Uint32(sum[:]) {
		return r, errors.New("a wrong checksum")
	}
	if err := json.Unmarshal(payload, &r); err != nil {
		return r, fmt.Errorf("unreadable: %w", err)
	}
	return r, nil
}
