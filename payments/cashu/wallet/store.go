package wallet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/internal/flockfile"
	"github.com/cvmgo/cvm/payments/cashu"
)

// ErrBusy is returned when another process kept a mint's proof file
// locked for the whole wait.
var ErrBusy = errors.New("cashu wallet: another cvm is using the proofs of this mint")

// mintFile is a mint's proof file of version 1, one JSON document,
// converted to a journal when first opened: the proofs the wallet holds
// there, and the operations begun and not yet finished, whose outputs
// (secrets and blinding factors) are written before the request that has
// the mint sign them, so that a crash between the two loses nothing that
// can be recovered (see recover.go).
type mintFile struct {
	Version int           `json:"version"`
	Mint    string        `json:"mint"`
	Proofs  []cashu.Proof `json:"proofs"`
	Pending []pendingOp   `json:"pending,omitempty"`
}

// Kinds of pending operation.
const (
	opSwap = "swap" // send or receive: Inputs for Outputs at /v1/swap
	opMint = "mint" // Quote's outputs at /v1/mint/bolt11, once paid
)

// pendingOp is an operation whose outcome at the mint is not known yet.
// For a swap, Ours says whether the inputs were the wallet's own proofs
// (a send) or a token's (a receive): only the former go back to Proofs
// when the swap did not happen.
type pendingOp struct {
	Kind    string         `json:"kind"`
	Quote   string         `json:"quote,omitempty"`
	Inputs  []cashu.Proof  `json:"inputs,omitempty"`
	Ours    bool           `json:"ours,omitempty"`
	Outputs []storedOutput `json:"outputs"`
	Started time.Time      `json:"started"`
}

// storedOutput is a cashu.Output as the file keeps it (its blinding
// factor as hex).
type storedOutput struct {
	Amount uint64 `json:"amount"`
	ID     string `json:"id"`
	B      string `json:"B_"`
	Secret string `json:"secret"`
	R      string `json:"r"`
}

func storeOutputs(outs []cashu.Output) []storedOutput {
	s := make([]storedOutput, len(outs))
	for i, o := range outs {
		s[i] = storedOutput{Amount: o.Message.Amount, ID: o.Message.ID, B: o.Message.B, Secret: o.Secret, R: hex.EncodeToString(o.R.Serialize())}
	}
	return s
}

func loadOutputs(s []storedOutput) ([]cashu.Output, error) {
	outs := make([]cashu.Output, len(s))
	for i, o := range s {
		rb, err := hex.DecodeString(o.R)
		if err != nil || len(rb) != 32 {
			return nil, fmt.Errorf("cashu wallet: stored output %d has a malformed blinding factor", i)
		}
		r, _ := btcec.PrivKeyFromBytes(rb)
		out, err := cashu.NewOutput(o.ID, o.Amount, o.Secret, r)
		if err != nil || out.Message.B != o.B {
			return nil, fmt.Errorf("cashu wallet: stored output %d does not blind to its message", i)
		}
		outs[i] = out
	}
	return outs, nil
}

func (op pendingOp) amount() uint64 {
	var total uint64
	for _, o := range op.Outputs {
		total += o.Amount
	}
	return total
}

// key names a pending operation: its first output's blinded message.
func (op pendingOp) key() string { return op.Outputs[0].B }

// minCompact is the least a journal grows past its first record before it
// is compacted: below it, rewriting the state costs more than the records
// it saves to read.
const minCompact = 64 << 10

// store keeps one proof file per mint in dir: NAME.json, mode 0600, where
// NAME is the mint's host and port and a hash of its whole URL. Each is a
// journal (journal.go) locked for the length of an operation, so that
// two cvm processes never lose proofs, and read by a Wallet once: each
// operation reads only what other processes appended since.
type store struct {
	dir     string
	timeout time.Duration
	// A journal is compacted when its records past the first take more
	// than compactAt bytes (minCompact) and compactRatio times the first
	// (2); both 0 in tests, to compact at every operation.
	compactAt, compactRatio int64
	sync                    *syncer

	mu       sync.Mutex
	journals map[string]*journal // by path
}

func (s *store) path(mint string) string {
	u, _ := url.Parse(mint)
	host := strings.NewReplacer(":", "_", "[", "", "]", "").Replace(u.Host)
	sum := sha256.Sum256([]byte(mint))
	return filepath.Join(s.dir, host+"-"+hex.EncodeToString(sum[:6])+".json")
}

// journal is one proof file as this Wallet last read it.
type journal struct {
	mu   sync.Mutex // held by an operation for its length, by Balance briefly
	path string
	st   *mintState // nil until read
	f    *os.File   // the file read, open to append; nil: read it again
	ino  uint64     // f's inode
	off  int64      // the length of f's complete records, all applied to st
	base int64      // the length of its first record, the snapshot
}

func (s *store) journal(path string) *journal {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.journals[path]
	if j == nil {
		j = &journal{path: path}
		s.journals[path] = j
	}
	return j
}

// refresh brings j up to date with its file: the records appended since
// it last read them when the file is the same one (same inode) grown, else
// the whole file. Under the lock (held not nil) it also cuts a torn last
// record off and turns a file of version 1 into a journal; without the
// lock (Balance) it reads complete records only and changes no file.
// Without mint, the file's own is taken.
func (j *journal) refresh(held *flockfile.Held, mint string) error {
	fi, err := os.Stat(j.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		j.drop()
		j.st = nil
		if mint != "" {
			j.st = newMintState(mint)
		}
		return nil
	case err != nil:
		return err
	case j.f != nil && inode(fi) == j.ino && fi.Size() >= j.off:
		if fi.Size() == j.off {
			return nil
		}
		err = j.readTail(held != nil, fi.Size())
	default:
		err = j.reload(held, mint)
	}
	if err != nil {
		j.drop()
		return fmt.Errorf("%s: %w", j.path, err)
	}
	return nil
}

func (j *journal) readTail(locked bool, size int64) error {
	tail := make([]byte, size-j.off)
	if _, err := j.f.ReadAt(tail, j.off); err != nil {
		return err
	}
	recs, n, err := parseRecords(tail)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := j.st.apply(r); err != nil {
			return err
		}
	}
	j.off += int64(n)
	if locked && n < len(tail) {
		return j.f.Truncate(j.off)
	}
	return nil
}

func (j *journal) reload(held *flockfile.Held, mint string) error {
	j.drop()
	f, fi, err := openAppend(j.path)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return err
	}
	if !isJournal(data) {
		f.Close()
		if j.st, err = loadV1(data, mint); err != nil || held == nil {
			return err // read again, and migrated, under the lock
		}
		return j.rewrite(held)
	}
	st, n, err := loadJournal(data, mint)
	if err != nil {
		f.Close()
		return err
	}
	j.st, j.f, j.ino, j.off, j.base = st, f, inode(fi), int64(n), int64(bytes.IndexByte(data, '\n')+1)
	if held != nil && n < len(data) {
		return f.Truncate(j.off)
	}
	return nil
}

// openAppend opens path to append to it, and says which file it is.
func openAppend(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// rewrite writes j's state whole as a new journal of one record (a
// temporary file fsynced and renamed over the old, the directory fsynced):
// a new file, a file of version 1, a compaction.
func (j *journal) rewrite(held *flockfile.Held) error {
	j.drop()
	line, err := encodeRecord(j.st.snapshot())
	if err != nil {
		return err
	}
	if err := held.Write(line); err != nil {
		return err
	}
	f, fi, err := openAppend(j.path)
	if err != nil {
		return err
	}
	j.f, j.ino, j.off, j.base = f, inode(fi), int64(len(line)), int64(len(line))
	return nil
}

// drop forgets the file read: the next operation reads it whole.
func (j *journal) drop() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// session is one operation's hold on a mint's proof file: its lock, and
// the changes made to its state since the last save.
type session struct {
	s      *store
	held   *flockfile.Held
	j      *journal
	change record
	err    error // a change that could not be made: save fails
}

// open locks and reads the proof file of mint (normalized).
func (s *store) open(ctx context.Context, mint string) (*session, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	path := s.path(mint)
	held, err := flockfile.Hold(ctx, path, 0o600, s.timeout)
	if errors.Is(err, flockfile.ErrLockTimeout) {
		return nil, fmt.Errorf("%w (%s) for %s; wait for it to finish", ErrBusy, mint, s.timeout)
	}
	if err != nil {
		return nil, err
	}
	j := s.journal(path)
	j.mu.Lock()
	if err := j.refresh(held, mint); err != nil {
		j.mu.Unlock()
		held.Close()
		return nil, err
	}
	return &session{s: s, held: held, j: j}, nil
}

// state is the mint's proofs, pending operations and sent tokens, with
// the changes of this operation: read it, change it by the methods below.
func (ss *session) state() *mintState { return ss.j.st }

// keep adds proofs to the spendable ones.
func (ss *session) keep(proofs ...cashu.Proof) { ss.record(record{Proofs: proofs}) }

// spend takes proofs out of the spendable ones.
func (ss *session) spend(proofs []cashu.Proof) { ss.record(record{Spent: secrets(proofs)}) }

// pend adds a pending operation.
func (ss *session) pend(p pendingOp) { ss.record(record{Pending: []pendingOp{p}}) }

// finish forgets a pending operation.
func (ss *session) finish(p pendingOp) { ss.record(record{Done: []string{p.key()}}) }

// handOut moves proofs from the spendable ones to a sent token.
func (ss *session) handOut(proofs []cashu.Proof) sentToken {
	sum, _ := cashu.SumProofs(proofs)
	t := sentToken{Amount: sum, Time: time.Now().UTC(), Proofs: proofs}
	ss.record(record{Spent: secrets(proofs), Sent: []sentToken{t}})
	return t
}

// unsend forgets the sent tokens whose first proofs are among proofs,
// and puts proofs back among the spendable ones when back is set.
func (ss *session) unsend(proofs []cashu.Proof, back bool) {
	r := record{Unsent: slices.DeleteFunc(secrets(proofs), func(k string) bool { _, ok := ss.state().sent[k]; return !ok })}
	if back {
		r.Proofs = proofs
	}
	ss.record(r)
}

// record applies r to the state and adds it to the changes to save: a
// removal cancels an addition of the same key made since the last save.
func (ss *session) record(r record) {
	if err := ss.j.st.apply(r); err != nil {
		ss.err = errors.Join(ss.err, err)
		return
	}
	c := &ss.change
	c.Proofs = slices.DeleteFunc(c.Proofs, func(p cashu.Proof) bool { return slices.Contains(r.Spent, p.Secret) })
	c.Pending = slices.DeleteFunc(c.Pending, func(p pendingOp) bool { return slices.Contains(r.Done, p.key()) })
	c.Sent = slices.DeleteFunc(c.Sent, func(t sentToken) bool { return slices.Contains(r.Unsent, t.key()) })
	c.Spent, c.Done, c.Unsent = append(c.Spent, r.Spent...), append(c.Done, r.Done...), append(c.Unsent, r.Unsent...)
	c.Proofs, c.Pending, c.Sent = append(c.Proofs, r.Proofs...), append(c.Pending, r.Pending...), append(c.Sent, r.Sent...)
}

func secrets(proofs []cashu.Proof) []string {
	s := make([]string, len(proofs))
	for i, p := range proofs {
		s[i] = p.Secret
	}
	return s
}

// save appends the changes made since the last save as one record, one
// write(2): once it returns, a crash of the process loses nothing; the
// Wallet fsyncs it within Options.SyncInterval (syncer.go). The file's
// first save writes it whole.
func (ss *session) save() error {
	if ss.err != nil {
		ss.j.drop() // the state is not the file's: read it again
		return ss.err
	}
	if ss.change.empty() {
		return nil
	}
	change := ss.change
	ss.change = record{}
	if ss.j.f == nil {
		return ss.j.rewrite(ss.held)
	}
	line, err := encodeRecord(change)
	if err != nil {
		return err
	}
	if _, err := ss.j.f.Write(line); err != nil {
		ss.j.drop() // maybe part of the record: cut off by the next open
		return fmt.Errorf("%s: %w", ss.j.path, err)
	}
	ss.j.off += int64(len(line))
	return ss.s.sync.mark(ss.j.path)
}

// overgrown says whether the journal has grown enough past its snapshot
// to be compacted: by more than minCompact and twice the snapshot, so
// that rewriting a file whole costs O(1) per record appended, and reading
// it whole at most three times the state.
func (ss *session) overgrown() bool {
	return ss.j.f != nil && ss.j.off-ss.j.base > max(ss.s.compactAt, ss.s.compactRatio*ss.j.base)
}

// compact rewrites the journal as one record of its state, less the sent
// tokens of forget.
func (ss *session) compact(forget []string) error {
	if err := ss.save(); err != nil {
		return err
	}
	if err := ss.j.st.apply(record{Unsent: forget}); err != nil {
		return err
	}
	if err := ss.j.rewrite(ss.held); err != nil {
		return fmt.Errorf("%s: %w", ss.j.path, err)
	}
	return nil
}

func (ss *session) close() {
	ss.j.mu.Unlock()
	ss.held.Close()
}

// balances reads every mint's proof file without its lock: only complete
// records, so a concurrent append is seen whole or not at all.
func (s *store) balances() ([]MintBalance, error) {
	paths, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	out := make([]MintBalance, 0, len(paths))
	for _, p := range paths {
		j := s.journal(p)
		j.mu.Lock()
		err := j.refresh(nil, "")
		if err == nil && j.st != nil {
			out = append(out, j.st.balance())
		}
		j.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
