package wallet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/internal/flockfile"
	"github.com/cvmgo/cvm/payments/cashu"
)

// ErrBusy is returned when another process kept a mint's proof file
// locked for the whole wait.
var ErrBusy = errors.New("cashu wallet: another cvm is using the proofs of this mint")

// fileVersion is the version of the proof file's format.
const fileVersion = 1

// mintFile is the contents of one mint's proof file: the proofs the wallet
// holds there, and the operations begun and not yet finished, whose
// outputs (secrets and blinding factors) are written before the request
// that has the mint sign them, so that a crash between the two loses
// nothing that can be recovered (see recover.go).
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

// store keeps one proof file per mint in dir: NAME.json, mode 0600, where
// NAME is the mint's host and port and a hash of its whole URL. Each is
// written whole (a temporary file renamed over it) and locked for the
// length of an operation, so that two cvm processes never lose proofs.
type store struct {
	dir     string
	timeout time.Duration
}

func (s store) path(mint string) string {
	u, _ := url.Parse(mint)
	host := strings.NewReplacer(":", "_", "[", "", "]", "").Replace(u.Host)
	sum := sha256.Sum256([]byte(mint))
	return filepath.Join(s.dir, host+"-"+hex.EncodeToString(sum[:6])+".json")
}

// session is one mint's proof file, held under its lock.
type session struct {
	held *flockfile.Held
	f    mintFile
}

// open locks and reads the proof file of mint (normalized).
func (s store) open(ctx context.Context, mint string) (*session, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	held, err := flockfile.Hold(ctx, s.path(mint), 0o600, s.timeout)
	if errors.Is(err, flockfile.ErrLockTimeout) {
		return nil, fmt.Errorf("%w (%s) for %s; wait for it to finish", ErrBusy, mint, s.timeout)
	}
	if err != nil {
		return nil, err
	}
	data, err := held.Read()
	if err != nil {
		held.Close()
		return nil, err
	}
	ss := &session{held: held, f: mintFile{Version: fileVersion, Mint: mint}}
	if data != nil {
		if err := ss.parse(data, mint); err != nil {
			held.Close()
			return nil, fmt.Errorf("%s: %w", s.path(mint), err)
		}
	}
	return ss, nil
}

func (ss *session) parse(data []byte, mint string) error {
	if err := json.Unmarshal(data, &ss.f); err != nil {
		return fmt.Errorf("cashu wallet: unreadable proof file: %w", err)
	}
	switch {
	case ss.f.Version != fileVersion:
		return fmt.Errorf("cashu wallet: proof file version %d, this cvm reads %d", ss.f.Version, fileVersion)
	case ss.f.Mint != mint:
		return fmt.Errorf("cashu wallet: proof file of %s, not %s", ss.f.Mint, mint)
	}
	return nil
}

// save writes the file whole; once it returns, a crash loses nothing in it.
func (ss *session) save() error {
	data, err := json.MarshalIndent(ss.f, "", " ")
	if err != nil {
		return err
	}
	return ss.held.Write(append(data, '\n'))
}

func (ss *session) close() { ss.held.Close() }

// files reads every proof file in dir, without locks: each is replaced
// whole, so a read sees one complete version.
func (s store) files() ([]mintFile, error) {
	paths, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []mintFile
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var f mintFile
		if err := json.Unmarshal(data, &f); err != nil || f.Version != fileVersion {
			return nil, fmt.Errorf("%s: cashu wallet: unreadable proof file", p)
		}
		out = append(out, f)
	}
	return out, nil
}
