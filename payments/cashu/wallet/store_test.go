package wallet

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/internal/testwait"
	"github.com/cvmgo/cvm/payments/cashu"
)

// The test binary doubles as the sending process of the crash test.
func TestMain(m *testing.M) {
	if mintURL := os.Getenv("CASHU_WALLET_SENDER"); mintURL != "" {
		sender(mintURL, os.Getenv("CASHU_WALLET_DIR"))
		return
	}
	os.Exit(m.Run())
}

// sender sends tokens of 1 sat from dir's wallet until it runs out,
// printing each token's secrets once Send has returned. Its fsyncs wait
// an hour: what it wrote survives its death without them.
func sender(mintURL, dir string) {
	w := New(Options{Dir: dir, SyncInterval: time.Hour})
	out := bufio.NewWriter(os.Stdout)
	for {
		var tok cashu.Token
		err := w.Send(context.Background(), mintURL, 1, keep(&tok))
		if errors.Is(err, ErrInsufficient) {
			os.Exit(0)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintln(out, strings.Join(secrets(tok.Proofs), ","))
		out.Flush()
	}
}

// fakeProof is a proof no mint signed, for tests of the file alone.
func fakeProof(amount uint64) cashu.Proof {
	b := make([]byte, 32)
	rand.Read(b)
	return cashu.Proof{Amount: amount, ID: "00aabbccddeeff00", Secret: hex.EncodeToString(b), C: "02" + hex.EncodeToString(b)}
}

const fileMint = "https://mint.example.com"

// change opens the proof file of fileMint in w's store, lets f change it,
// and saves.
func change(t *testing.T, w *Wallet, f func(*session)) {
	t.Helper()
	ss, err := w.store.open(context.Background(), fileMint)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.close()
	f(ss)
	if err := ss.save(); err != nil {
		t.Fatal(err)
	}
}

// stateOf reads the proof file of mintURL in dir afresh: a new wallet,
// under the lock.
func stateOf(t *testing.T, dir, mintURL string) *mintState {
	t.Helper()
	ss, err := New(Options{Dir: dir}).store.open(context.Background(), mintURL)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.close()
	return ss.state()
}

// kill -9 of a process sending token after token loses none of the sends
// it completed: each token's proofs are out of the spendable ones and
// among the sent tokens, though nothing was fsynced, and no sat is lost
// (held, sent and pending add up to what was minted). A second process
// carries on from where the first died, and then a third.
func TestWallet_KillNineLosesNoCompletedSend(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	const minted = 400
	if err := newWallet(t, dir, nil, nil).Mint(ctx, tm.url, minted, tm.pay); err != nil {
		t.Fatal(err)
	}
	var acked [][]string
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CASHU_WALLET_SENDER="+tm.url, "CASHU_WALLET_DIR="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for n := 0; n < 25 && sc.Scan(); n++ {
			acked = append(acked, strings.Split(sc.Text(), ","))
		}
		cmd.Process.Kill() // SIGKILL, wherever the sender is
		cmd.Wait()
		st := stateOf(t, dir, tm.url)
		for _, tok := range acked {
			for _, s := range tok {
				if _, ok := st.proofs[s]; ok {
					t.Fatalf("round %d: a proof of a token sent is spendable again", round)
				}
			}
			if _, ok := st.sent[tok[0]]; !ok {
				t.Fatalf("round %d: a token sent is not among the sent tokens", round)
			}
		}
		if total := st.sats + st.sentSats + st.pendingSats; total != minted {
			t.Fatalf("round %d: %d held, %d sent, %d pending: %d in all, want %d", round, st.sats, st.sentSats, st.pendingSats, total, minted)
		}
	}
	if len(acked) != 75 {
		t.Fatalf("%d sends acknowledged, want 75", len(acked))
	}
}

// A record cut short by a power loss (the end of the file) is cut off
// when the file is next opened, by a wallet that read it before (its
// tail) or not (whole), and the appends after it are read back.
func TestJournal_TornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	w := New(Options{Dir: dir})
	change(t, w, func(ss *session) { ss.keep(fakeProof(1)) })
	change(t, w, func(ss *session) { ss.keep(fakeProof(2)) })
	tear := func() {
		line, err := encodeRecord(record{Proofs: []cashu.Proof{fakeProof(1 << 10)}})
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(w.store.path(fileMint), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(line[:len(line)/2]); err != nil {
			t.Fatal(err)
		}
	}
	tear()
	if bs, err := New(Options{Dir: dir}).Balance(); err != nil || bs[0].Sats != 3 {
		t.Fatalf("the balance with a torn record: %v, %v; want 3 sats", bs, err)
	}
	change(t, w, func(ss *session) { ss.keep(fakeProof(4)) }) // w read the file before
	tear()
	change(t, New(Options{Dir: dir}), func(ss *session) { ss.keep(fakeProof(8)) }) // a new wallet
	if st := stateOf(t, dir, fileMint); st.sats != 15 {
		t.Fatalf("after appends past torn records: %d sats, want 15", st.sats)
	}
}

// A damaged record before the last is refused, the error naming the file:
// what it held is not guessed at.
func TestJournal_CorruptRecordIsRefused(t *testing.T) {
	dir := t.TempDir()
	w := New(Options{Dir: dir})
	for _, amount := range []uint64{1, 2, 4} {
		change(t, w, func(ss *session) { ss.keep(fakeProof(amount)) })
	}
	path := w.store.path(fileMint)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines[1] = strings.Replace(lines[1], `"amount":2`, `"amount":9`, 1)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Dir: dir}).store.open(context.Background(), fileMint)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("opening a file with a damaged record: %v; want ErrCorrupt naming %s", err, path)
	}
	if _, err := New(Options{Dir: dir}).Balance(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the balance of a file with a damaged record: %v; want ErrCorrupt", err)
	}
}

// Two wallets on one directory (two processes) taking turns each see what
// the other did since it last looked, appended or compacted: no proof is
// sent twice, and the sats add up.
func TestWallet_TwoWalletsSeeEachOthersChanges(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	ws := []*Wallet{newWallet(t, dir, nil, nil), newWallet(t, dir, nil, nil)}
	if err := ws[0].Mint(ctx, tm.url, 64, tm.pay); err != nil {
		t.Fatal(err)
	}
	ws[1].store.compactAt, ws[1].store.compactRatio = 0, 0 // compacts at each operation
	var toks []cashu.Token
	for i := range 8 {
		w := ws[i%2]
		var tok cashu.Token
		if err := w.Send(ctx, tm.url, 3, keep(&tok)); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
		for j, other := range ws {
			if sats, _ := held(t, other, tm.url); sats != 64-3*uint64(i+1) {
				t.Fatalf("after send %d, wallet %d sees %d sats, want %d", i+1, j, sats, 64-3*(i+1))
			}
		}
	}
	bob := newWallet(t, t.TempDir(), nil, nil)
	for i, tok := range toks {
		if got, err := bob.Receive(ctx, tok); err != nil || got != 3 {
			t.Fatalf("token %d: %d, %v", i, got, err)
		}
	}
}

// unpaidQuote is a pending mint of 8 sats whose invoice nobody pays: kept
// by every operation at the mint until it expires.
func unpaidQuote(t *testing.T, mintURL string) pendingOp {
	t.Helper()
	ctx := context.Background()
	c, err := NewClient(mintURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.MintQuote(ctx, cashu.MintQuoteBolt11Request{Amount: 8, Unit: Unit})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := c.Keysets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := cashu.NewOutputs(ks.Keysets[0].ID, []uint64{8})
	if err != nil {
		t.Fatal(err)
	}
	return pendingOp{Kind: opMint, Quote: q.Quote, Outputs: storeOutputs(outs), Started: time.Now().UTC()}
}

// A compaction keeps every proof and pending operation, and forgets the
// sent tokens the mint says are spent, asking it once for them all; the
// others are kept.
func TestWallet_CompactionForgetsSpentSentTokens(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	ct := &countingTransport{n: map[string]int{}}
	w := newWallet(t, dir, &http.Client{Transport: ct}, nil)
	if err := w.Mint(ctx, tm.url, 100, tm.pay); err != nil {
		t.Fatal(err)
	}
	pending := unpaidQuote(t, tm.url)
	var toks []cashu.Token
	for range 3 {
		var tok cashu.Token
		if err := w.Send(ctx, tm.url, 3, keep(&tok)); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	bob := newWallet(t, t.TempDir(), nil, nil)
	for _, tok := range toks[:2] {
		if _, err := bob.Receive(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := w.store.open(ctx, tm.url)
	if err != nil {
		t.Fatal(err)
	}
	ss.pend(pending)
	err = ss.save()
	ss.close()
	if err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, dir, tm.url)
	w.store.compactAt, w.store.compactRatio = 0, 0
	ct.take()
	if err := w.Restore(ctx, toks[2]); err != nil { // an operation: compacts first
		t.Fatal(err)
	}
	if n := ct.take(); n["/v1/checkstate"] != 2 { // the compaction's, Restore's
		t.Fatalf("requests %v; want two checkstates, one for the compaction", n)
	}
	data, err := os.ReadFile(w.store.path(tm.url))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != 2 {
		t.Fatalf("the file has %d records after a compaction and a change, want 2", lines)
	}
	after := stateOf(t, dir, tm.url)
	for s := range before.proofs {
		if _, ok := after.proofs[s]; !ok {
			t.Fatal("a proof was lost by the compaction")
		}
	}
	if _, ok := after.pending[pending.key()]; !ok || len(after.pending) != 1 {
		t.Fatalf("pending after the compaction: %v; want the unpaid quote", after.pending)
	}
	if len(after.sent) != 0 || after.sats != 100-6 {
		t.Fatalf("after the compaction and the restore: %d sent tokens, %d sats; want none and 94", len(after.sent), after.sats)
	}
	// Without Restore: the unspent token is kept by a compaction.
	var tok cashu.Token
	if err := w.Send(ctx, tm.url, 3, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(ctx, tm.url, 3, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, dir, tm.url); len(st.sent) != 2 {
		t.Fatalf("%d sent tokens after two sends and a compaction, want 2 (unspent, kept)", len(st.sent))
	}
}

// A proof file of version 1 is read (by Balance, without the lock) and
// turned into a journal by the first operation, its proofs and pending
// operations kept.
func TestWallet_MigratesVersion1Files(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	src := t.TempDir()
	if err := newWallet(t, src, nil, nil).Mint(ctx, tm.url, 100, tm.pay); err != nil {
		t.Fatal(err)
	}
	v1 := mintFile{Version: 1, Mint: tm.url, Proofs: stateOf(t, src, tm.url).held(), Pending: []pendingOp{unpaidQuote(t, tm.url)}}
	data, err := json.MarshalIndent(v1, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := newWallet(t, dir, nil, nil)
	path := w.store.path(tm.url)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if sats, pending := held(t, w, tm.url); sats != 100 || pending != 8 {
		t.Fatalf("a file of version 1: %d held, %d pending; want 100 and 8", sats, pending)
	}
	if data, _ := os.ReadFile(path); isJournal(data) {
		t.Fatal("Balance, without the lock, changed the file")
	}
	stateOf(t, dir, tm.url) // opened: converted
	if data, _ := os.ReadFile(path); !isJournal(data) {
		t.Fatal("the file was not turned into a journal when opened")
	}
	var tok cashu.Token
	if err := w.Send(ctx, tm.url, 4, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	st := stateOf(t, dir, tm.url)
	for _, p := range v1.Proofs {
		_, kept := st.proofs[p.Secret]
		if sent := slices.ContainsFunc(tok.Proofs, func(q cashu.Proof) bool { return q.Secret == p.Secret }); kept == sent {
			t.Fatalf("a proof of %d of the version 1 file: kept %v, sent %v", p.Amount, kept, sent)
		}
	}
	if _, ok := st.pending[v1.Pending[0].key()]; !ok || st.sats != 96 || st.pendingSats != 8 {
		t.Fatalf("after migrating and sending 4: %d held, %d pending, %v; want 96, 8 and the quote", st.sats, st.pendingSats, st.pending)
	}
}

// The wallet fsyncs what it appended when its timer fires, or at Close if
// that comes first; Close twice is Close once; after it, every append is
// fsynced at once.
func TestWallet_FsyncsAtIntervalsAndClose(t *testing.T) {
	for _, interval := range []time.Duration{time.Hour, time.Millisecond} {
		t.Run(interval.String(), func(t *testing.T) {
			w := New(Options{Dir: t.TempDir(), SyncInterval: interval})
			var n atomic.Int32
			w.store.sync.fsync = func(string) error { n.Add(1); return nil }
			change(t, w, func(ss *session) { ss.keep(fakeProof(1)) }) // a new file: written whole, fsynced
			for range 3 {
				change(t, w, func(ss *session) { ss.keep(fakeProof(1)) })
			}
			if interval == time.Hour {
				if got := n.Load(); got != 0 {
					t.Fatalf("%d fsyncs before the interval ended", got)
				}
			} else {
				testwait.Eventually(t, 10*time.Second, "the timer's fsync", func() bool { return n.Load() == 1 })
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := n.Load(); got != 1 {
				t.Fatalf("%d fsyncs after Close, want 1", got)
			}
			change(t, w, func(ss *session) { ss.keep(fakeProof(1)) })
			if got := n.Load(); got != 2 {
				t.Fatalf("%d fsyncs after an append after Close, want 2", got)
			}
		})
	}
}

func FuzzParseRecords(f *testing.F) {
	for _, r := range []record{
		{Version: journalVersion, Mint: fileMint, Proofs: []cashu.Proof{fakeProof(1)}},
		{Spent: []string{"a"}, Done: []string{"b"}, Unsent: []string{"c"}},
		{Sent: []sentToken{{Amount: 1, Proofs: []cashu.Proof{fakeProof(1)}}}},
	} {
		line, err := encodeRecord(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(line)
		f.Add(append(line, line[:len(line)/2]...))
	}
	f.Add([]byte(`{"crc":"00000000","rec":{}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, n, err := parseRecords(data)
		if err != nil {
			return
		}
		if n > len(data) || n < len(data) && strings.Contains(string(data[n:len(data)-1]), "\n") {
			t.Fatalf("took %d of %d bytes, leaving more than the last line", n, len(data))
		}
		var again []byte
		for _, r := range recs {
			line, err := encodeRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			again = append(again, line...)
		}
		recs2, n2, err := parseRecords(again)
		if err != nil || n2 != len(again) || len(recs2) != len(recs) {
			t.Fatalf("the records parsed, written again, read back as %d of %d (%v)", len(recs2), len(recs), err)
		}
		if len(recs) > 0 {
			if s, _, err := loadJournal(data[:n], ""); err == nil && s.mint != recs[0].Mint {
				t.Fatalf("a journal of %q read as %q's", recs[0].Mint, s.mint)
			}
		}
	})
}
