package wallet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/payments/cashu"
	"github.com/cvmgo/cvm/payments/cashu/mint"
	"github.com/cvmgo/cvm/payments/lnsim"
)

// testMint is cvm's mint (package mint) on an httptest server over a
// simulated Lightning network, and alice's wallet there, which pays its
// invoices.
type testMint struct {
	url   string
	net   *lnsim.Network
	alice *lnsim.Wallet
}

func startMint(t testing.TB, feePPK uint64) *testMint {
	t.Helper()
	net, err := lnsim.Open(lnsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mint", "alice"} {
		if _, err := net.AddWallet(name, 1_000_000_000); err != nil {
			t.Fatal(err)
		}
	}
	mw, _ := net.Wallet("mint")
	alice, _ := net.Wallet("alice")
	m, err := mint.New(mint.Options{Store: durable.NewMemory(durable.Options{}), Lightning: mw, Seed: bytes.Repeat([]byte{9}, 32), InputFeePPK: feePPK})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(func() { srv.Close(); m.Close() })
	return &testMint{url: srv.URL, net: net, alice: alice}
}

// pay pays the mint's invoice from alice's wallet.
func (tm *testMint) pay(ctx context.Context, invoice string, _ uint64) error {
	_, err := tm.alice.PayInvoice(ctx, invoice)
	return err
}

func newWallet(t testing.TB, dir string, hc *http.Client, log *bytes.Buffer) *Wallet {
	t.Helper()
	opts := Options{Dir: dir, HTTP: hc, PaidWait: 20 * time.Second}
	if log != nil {
		opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	return New(opts)
}

func held(t *testing.T, w *Wallet, mintURL string) (sats, pending uint64) {
	t.Helper()
	bs, err := w.Balance()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Mint == mintURL {
			return b.Sats, b.Pending
		}
	}
	return 0, 0
}

// keep is a DeliverFunc that keeps the token it is handed.
func keep(tok *cashu.Token) DeliverFunc {
	return func(t cashu.Token) error { *tok = t; return nil }
}

// A wallet mints with a paid quote, sends a token of an amount no subset
// of its proofs makes (a swap, change kept), and another wallet receives
// it; the same token received again is refused, saying why; the sats add
// up at every step, and the mint's fee comes off what is received.
func TestWallet_MintSendReceive(t *testing.T) {
	for _, fee := range []uint64{0, 1000} {
		t.Run(fmt.Sprintf("fee%d", fee), func(t *testing.T) {
			tm := startMint(t, fee)
			ctx := context.Background()
			alice := newWallet(t, t.TempDir(), nil, nil)
			if err := alice.Mint(ctx, tm.url, 100, tm.pay); err != nil {
				t.Fatal(err)
			}
			if got, _ := held(t, alice, tm.url); got != 100 {
				t.Fatalf("minted 100, hold %d", got)
			}
			var tok cashu.Token
			if err := alice.Send(ctx, tm.url, 30, keep(&tok)); err != nil {
				t.Fatal(err)
			}
			if amt, _ := tok.Amount(); amt != 30 || tok.Mint != tm.url || tok.Unit != Unit {
				t.Fatalf("sent a token of %d %s at %s, want 30 sat at %s", amt, tok.Unit, tok.Mint, tm.url)
			}
			// 100 in 4+32+64: 30 takes a swap, whose inputs pay the fee.
			swapFee := uint64(0)
			if fee > 0 {
				swapFee = 1
			}
			if got, _ := held(t, alice, tm.url); got != 70-swapFee {
				t.Fatalf("after sending 30, hold %d, want %d", got, 70-swapFee)
			}
			bob := newWallet(t, t.TempDir(), nil, nil)
			got, err := bob.Receive(ctx, tok)
			receiveFee, _ := feeOf(len(tok.Proofs), fee)
			if err != nil || got != 30-receiveFee {
				t.Fatalf("received %d, %v; want %d", got, err, 30-receiveFee)
			}
			if h, _ := held(t, bob, tm.url); h != got {
				t.Fatalf("bob holds %d after receiving %d", h, got)
			}
			_, err = bob.Receive(ctx, tok)
			if !errors.Is(err, ErrSpent) || !strings.Contains(err.Error(), "received before") {
				t.Fatalf("the same token again: %v, want ErrSpent saying it was received before", err)
			}
			if h, _ := held(t, bob, tm.url); h != got {
				t.Fatalf("bob holds %d after a refused receive, want %d", h, got)
			}
		})
	}
}

// feeOf is NUT-02's fee of n inputs at ppk.
func feeOf(n int, ppk uint64) (uint64, error) {
	total := uint64(n) * ppk
	return total/1000 + min(total%1000, 1), nil
}

// The proof file is the user's alone (0600, in a 0700 directory), and no
// proof's secret is in a log line or an error.
func TestWallet_ProofFileIsPrivate(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cashu")
	var log bytes.Buffer
	w := newWallet(t, dir, nil, &log)
	if err := w.Mint(ctx, tm.url, 5, tm.pay); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("proof files %v, want one", files)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, files[0]: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	var tok cashu.Token
	if err := w.Send(ctx, tm.url, 5, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Receive(ctx, tok) // spends them: a swap
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Receive(ctx, tok) // refused: spent
	for _, p := range tok.Proofs {
		if strings.Contains(log.String(), p.Secret) || strings.Contains(err.Error(), p.Secret) || strings.Contains(err.Error(), p.C) {
			t.Fatalf("a proof's secret is in the log or an error: %v", err)
		}
	}
}

// lossyTransport loses the answer to requests on path while lose is set:
// the request reaches the mint (or not, with before), the caller gets an
// error as if the process had died waiting.
type lossyTransport struct {
	path   string
	before bool
	lose   atomic.Bool
}

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != l.path || !l.lose.Load() {
		return http.DefaultTransport.RoundTrip(r)
	}
	if l.before {
		return nil, errors.New("connection refused (simulated)")
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body.Close()
	}
	return nil, errors.New("connection reset after the request was sent (simulated)")
}

// A swap whose answer is lost, after the mint carried it out or before it
// got there, loses nothing: its outputs were written first, and the next
// operation at the mint sends it again and keeps the proofs.
func TestWallet_SwapInterruptedLosesNothing(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("before=%v", before), func(t *testing.T) {
			tm := startMint(t, 0)
			ctx := context.Background()
			dir := t.TempDir()
			lossy := &lossyTransport{path: "/v1/swap", before: before}
			w := newWallet(t, dir, &http.Client{Transport: lossy}, nil)
			if err := w.Mint(ctx, tm.url, 100, tm.pay); err != nil {
				t.Fatal(err)
			}
			lossy.lose.Store(true)
			var tok cashu.Token
			err := w.Send(ctx, tm.url, 30, keep(&tok))
			if err == nil || tok.Proofs != nil {
				t.Fatalf("send with its swap answer lost: %v, token of %d proofs", err, len(tok.Proofs))
			}
			// 100 is 64+32+4: the 64 went into the swap.
			if sats, pending := held(t, w, tm.url); sats != 36 || pending != 64 {
				t.Fatalf("after the lost answer: %d held, %d pending; want 36 and 64", sats, pending)
			}
			lossy.lose.Store(false)
			// A new process: a wallet of its own on the same files.
			w2 := newWallet(t, dir, nil, nil)
			if err := w2.Send(ctx, tm.url, 30, keep(&tok)); err != nil {
				t.Fatal(err)
			}
			if sats, pending := held(t, w2, tm.url); sats != 70 || pending != 0 {
				t.Fatalf("after recovery and a send of 30: %d held, %d pending; want 70 and 0", sats, pending)
			}
			if got, err := newWallet(t, t.TempDir(), nil, nil).Receive(ctx, tok); err != nil || got != 30 {
				t.Fatalf("the token sent after recovery: %d, %v", got, err)
			}
		})
	}
}

// A mint whose invoice was paid and whose answer was then lost (the
// process died between paying and minting) is minted by the next
// operation at the mint: nothing paid for is lost.
func TestWallet_MintInterruptedAfterPayingLosesNothing(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	lossy := &lossyTransport{path: "/v1/mint/bolt11"}
	lossy.lose.Store(true)
	w := newWallet(t, dir, &http.Client{Transport: lossy}, nil)
	if err := w.Mint(ctx, tm.url, 64, tm.pay); err == nil {
		t.Fatal("mint with its answer lost succeeded")
	}
	if sats, pending := held(t, w, tm.url); sats != 0 || pending != 64 {
		t.Fatalf("after the lost answer: %d held, %d pending; want 0 and 64", sats, pending)
	}
	w2 := newWallet(t, dir, nil, nil)
	if err := w2.Mint(ctx, tm.url, 1, tm.pay); err != nil {
		t.Fatal(err)
	}
	if sats, pending := held(t, w2, tm.url); sats != 65 || pending != 0 {
		t.Fatalf("after recovery and minting 1 more: %d held, %d pending; want 65 and 0", sats, pending)
	}
}

// Wallets of two processes on the same files, sending at once, never hand
// out a proof twice nor lose one: every token is received, and the sats
// add up.
func TestWallet_ConcurrentSendersShareTheFile(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	if err := newWallet(t, dir, nil, nil).Mint(ctx, tm.url, 64, tm.pay); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var toks []cashu.Token
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		w := newWallet(t, dir, nil, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				err := w.Send(ctx, tm.url, 3, func(tok cashu.Token) error {
					mu.Lock()
					defer mu.Unlock()
					toks = append(toks, tok)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if sats, _ := held(t, newWallet(t, dir, nil, nil), tm.url); sats != 64-6*3 {
		t.Fatalf("after 6 sends of 3 from 64: %d held", sats)
	}
	bob := newWallet(t, t.TempDir(), nil, nil)
	for i, tok := range toks {
		if got, err := bob.Receive(ctx, tok); err != nil || got != 3 {
			t.Fatalf("token %d: %d, %v", i, got, err)
		}
	}
}

// A token is checked before anything is sent to the mint: a proof whose
// DLEQ proof does not verify, a token in another unit, a keyset the mint
// does not have; nothing is received and the token is not spent.
func TestWallet_ReceiveRefusesBadTokens(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	alice := newWallet(t, t.TempDir(), nil, nil)
	if err := alice.Mint(ctx, tm.url, 8, tm.pay); err != nil {
		t.Fatal(err)
	}
	var tok cashu.Token
	if err := alice.Send(ctx, tm.url, 8, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	forged := func(edit func(*cashu.Token)) cashu.Token {
		c := tok
		c.Proofs = append([]cashu.Proof(nil), tok.Proofs...)
		d := *c.Proofs[0].DLEQ
		c.Proofs[0].DLEQ = &d
		edit(&c)
		return c
	}
	bob := newWallet(t, t.TempDir(), nil, nil)
	for _, tc := range []struct {
		name string
		tok  cashu.Token
		want error
	}{
		{"DLEQ", forged(func(c *cashu.Token) { c.Proofs[0].DLEQ.S = c.Proofs[0].DLEQ.E }), cashu.ErrDLEQ},
		{"unit", forged(func(c *cashu.Token) { c.Unit = "usd" }), ErrTokenUnit},
		{"keyset", forged(func(c *cashu.Token) { c.Proofs[0].ID = "00ffffffffffffff" }), ErrKeyset},
		{"mint URL", forged(func(c *cashu.Token) { c.Mint = "http://192.0.2.1:3338" }), ErrMintURL},
	} {
		if _, err := bob.Receive(ctx, tc.tok); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got, err := bob.Receive(ctx, tok); err != nil || got != 8 {
		t.Fatalf("the genuine token after the refused ones: %d, %v", got, err)
	}
}

// A token's proofs leave the spendable ones, for a sent token, before it
// is delivered (another process sees them gone while deliver runs), and
// come back when delivery fails or the token is restored.
func TestWallet_SentProofsLeaveBeforeDelivery(t *testing.T) {
	tm := startMint(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	w := newWallet(t, dir, nil, nil)
	if err := w.Mint(ctx, tm.url, 3, tm.pay); err != nil { // 1 + 2
		t.Fatal(err)
	}
	other := newWallet(t, dir, nil, nil)
	seen := func() MintBalance {
		bs, err := other.Balance()
		if err != nil || len(bs) != 1 {
			t.Fatalf("balance: %v, %v", bs, err)
		}
		return bs[0]
	}
	failed := errors.New("delivery failed")
	err := w.Send(ctx, tm.url, 2, func(cashu.Token) error {
		if b := seen(); b.Sats != 1 || b.Sent != 2 {
			t.Errorf("while delivering 2 of 3: %d held, %d sent; want 1 and 2", b.Sats, b.Sent)
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("send with its delivery failing: %v", err)
	}
	if b := seen(); b.Sats != 3 || b.Sent != 0 {
		t.Fatalf("after a failed delivery: %d held, %d sent; want 3 and 0", b.Sats, b.Sent)
	}
	var tok cashu.Token
	if err := w.Send(ctx, tm.url, 2, keep(&tok)); err != nil {
		t.Fatal(err)
	}
	if b := seen(); b.Sats != 1 || b.Sent != 2 {
		t.Fatalf("after sending 2 of 3: %d held, %d sent; want 1 and 2", b.Sats, b.Sent)
	}
	if err := w.Restore(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if b := seen(); b.Sats != 3 || b.Sent != 0 {
		t.Fatalf("after restoring the token: %d held, %d sent; want 3 and 0", b.Sats, b.Sent)
	}
}

// A mint whose invoice was not paid (the budget refused, the payment
// failed) leaves nothing pending: the quote is dropped once the mint says
// it is unpaid.
func TestWallet_MintNotPaidLeavesNothingPending(t *testing.T) {
	tm := startMint(t, 0)
	w := newWallet(t, t.TempDir(), nil, nil)
	refused := errors.New("refused by the budget")
	err := w.Mint(context.Background(), tm.url, 10, func(context.Context, string, uint64) error { return refused })
	if !errors.Is(err, refused) {
		t.Fatalf("mint with its payment refused: %v", err)
	}
	if sats, pending := held(t, w, tm.url); sats != 0 || pending != 0 {
		t.Fatalf("after an unpaid mint: %d held, %d pending; want nothing", sats, pending)
	}
}
