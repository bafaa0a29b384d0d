package lnsim_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/lnsim"
)

// clock is a settable clock: expiry is tested without waiting.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func newNet(t *testing.T, opts lnsim.Options, wallets map[string]int64) *lnsim.Network {
	t.Helper()
	n, err := lnsim.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, bal := range wallets {
		if _, err := n.AddWallet(name, bal); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func balance(t *testing.T, n *lnsim.Network, name string) int64 {
	t.Helper()
	b, err := n.Balance(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var we *payments.WalletError
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("error %v, want a wallet error %s", err, code)
	}
}

// TestSettle pays an invoice between two wallets: a real signed regtest
// invoice from the payee's node, balances move by exactly its amount (no
// fee), the preimage hashes to the payment hash, and both sides see it
// settled.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	n := newNet(t, lnsim.Options{}, map[string]int64{"alice": 1_000_000, "bob": 0})
	bob, _ := n.Wallet("bob")
	alice, _ := n.Wallet("alice")
	var settled []lnsim.Settlement
	stop := n.OnSettle(func(s lnsim.Settlement) { settled = append(settled, s) })
	defer stop()

	inv, err := bob.MakeInvoice(ctx, 21_000, "a tool call", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := bolt11.Decode(inv.Bolt11)
	if err != nil {
		t.Fatal(err)
	}
	node, _ := n.NodeID("bob")
	if dec.Currency != bolt11.Regtest || dec.AmountMsat() != 21_000 || dec.PaymentHash() != inv.PaymentHash ||
		dec.Payee() != node || dec.Expiry() != 5*time.Minute || dec.Description != "a tool call" {
		t.Fatalf("invoice decodes to %+v", dec)
	}
	if inv.Settled() || inv.Preimage != "" {
		t.Fatal("new invoice is settled or shows its preimage")
	}

	pre, err := alice.PayInvoice(ctx, inv.Bolt11)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := hex.DecodeString(pre)
	if h := sha256.Sum256(pb); hex.EncodeToString(h[:]) != inv.PaymentHash {
		t.Fatal("preimage does not hash to the payment hash")
	}
	if a, b := balance(t, n, "alice"), balance(t, n, "bob"); a != 979_000 || b != 21_000 {
		t.Fatalf("balances alice %d bob %d", a, b)
	}
	for _, w := range []*lnsim.Wallet{alice, bob} {
		got, err := w.LookupInvoice(ctx, inv.PaymentHash)
		if err != nil || !got.Settled() || got.Preimage != pre {
			t.Fatalf("%s lookup: %+v, %v", w.Name(), got, err)
		}
	}
	if len(settled) != 1 || settled[0].Payer != "alice" || settled[0].Payee != "bob" {
		t.Fatalf("settlements %+v", settled)
	}
}

// TestPaymentFailures covers each refusal and checks that no balance
// moved: double payment, insufficient balance, expiry, an invoice from
// another network, the payer's own invoice, malformed input, unknown
// wallets and invoices.
func TestPaymentFailures(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	n := newNet(t, lnsim.Options{Now: c.Now}, map[string]int64{"alice": 50_000, "bob": 0, "carol": 10})
	alice, _ := n.Wallet("alice")
	bob, _ := n.Wallet("bob")
	carol, _ := n.Wallet("carol")

	inv, _ := bob.MakeInvoice(ctx, 20_000, "x", time.Minute)
	if _, err := alice.PayInvoice(ctx, inv.Bolt11); err != nil {
		t.Fatal(err)
	}
	_, err := alice.PayInvoice(ctx, inv.Bolt11)
	wantCode(t, err, payments.CodePaymentFailed)

	_, err = carol.PayInvoice(ctx, mustInvoice(t, bob, 20_000, time.Minute).Bolt11)
	wantCode(t, err, payments.CodeInsufficientBalance)

	expiring := mustInvoice(t, bob, 1_000, time.Minute)
	c.Advance(time.Minute)
	_, err = alice.PayInvoice(ctx, expiring.Bolt11)
	wantCode(t, err, payments.CodePaymentFailed)

	other := newNet(t, lnsim.Options{Now: c.Now}, map[string]int64{"bob": 0})
	ob, _ := other.Wallet("bob")
	_, err = alice.PayInvoice(ctx, mustInvoice(t, ob, 1_000, time.Minute).Bolt11)
	wantCode(t, err, payments.CodePaymentFailed)

	_, err = bob.PayInvoice(ctx, mustInvoice(t, bob, 1, time.Minute).Bolt11)
	wantCode(t, err, payments.CodePaymentFailed)

	_, err = alice.PayInvoice(ctx, "lnbcrt1garbage")
	wantCode(t, err, payments.CodePaymentFailed)

	_, err = n.Wallet("dave")
	wantCode(t, err, payments.CodeNotFound)
	_, err = alice.LookupInvoice(ctx, hex.EncodeToString(make([]byte, 32)))
	wantCode(t, err, payments.CodeNotFound)
	// carol neither made nor paid inv: she cannot see it.
	_, err = carol.LookupInvoice(ctx, inv.PaymentHash)
	wantCode(t, err, payments.CodeNotFound)
	_, err = bob.MakeInvoice(ctx, 0, "", time.Minute)
	wantCode(t, err, payments.CodeOther)

	if a, b, cb := balance(t, n, "alice"), balance(t, n, "bob"), balance(t, n, "carol"); a != 30_000 || b != 20_000 || cb != 10 {
		t.Fatalf("balances %d %d %d", a, b, cb)
	}
	got, _ := bob.LookupInvoice(ctx, expiring.PaymentHash)
	if got.Settled() || c.Now().Before(got.ExpiresAt) {
		t.Fatalf("expired invoice looks %+v", got)
	}
}

func mustInvoice(t *testing.T, w *lnsim.Wallet, msat int64, ttl time.Duration) payments.Invoice {
	t.Helper()
	inv, err := w.MakeInvoice(context.Background(), msat, "", ttl)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestConcurrentPayments races 8 payers on one invoice (exactly one wins)
// and 50 payments of distinct invoices (the total is conserved).
func TestConcurrentPayments(t *testing.T) {
	ctx := context.Background()
	n := newNet(t, lnsim.Options{}, map[string]int64{"a": 1_000_000, "b": 1_000_000, "shop": 0})
	shop, _ := n.Wallet("shop")
	inv := mustInvoice(t, shop, 1000, time.Minute)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		w, _ := n.Wallet([]string{"a", "b"}[i%2])
		wg.Go(func() {
			if _, err := w.PayInvoice(ctx, inv.Bolt11); err == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d payments of one invoice succeeded", wins.Load())
	}
	for i := range 50 {
		w, _ := n.Wallet([]string{"a", "b"}[i%2])
		wg.Go(func() {
			inv, err := shop.MakeInvoice(ctx, 100, "", time.Minute)
			if err == nil {
				_, err = w.PayInvoice(ctx, inv.Bolt11)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if s := balance(t, n, "shop"); s != 1000+50*100 {
		t.Fatalf("shop has %d", s)
	}
	if total := balance(t, n, "a") + balance(t, n, "b") + balance(t, n, "shop"); total != 2_000_000 {
		t.Fatalf("total %d: money created or destroyed", total)
	}
}

// TestPersistence reopens a network from its directory: balances, node
// keys (the same payee) and invoices (paid stays paid) survive, and the
// state file is private.
func TestPersistence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := newNet(t, lnsim.Options{Dir: dir}, map[string]int64{"alice": 5000, "bob": 0})
	bob, _ := n.Wallet("bob")
	alice, _ := n.Wallet("alice")
	paid := mustInvoice(t, bob, 2000, time.Hour)
	if _, err := alice.PayInvoice(ctx, paid.Bolt11); err != nil {
		t.Fatal(err)
	}
	open := mustInvoice(t, bob, 1000, time.Hour)
	node, _ := n.NodeID("bob")

	info, err := os.Stat(filepath.Join(dir, lnsim.StateFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", info, err)
	}

	n2 := newNet(t, lnsim.Options{Dir: dir}, map[string]int64{"alice": 999_999, "bob": 999_999})
	if a, b := balance(t, n2, "alice"), balance(t, n2, "bob"); a != 3000 || b != 2000 {
		t.Fatalf("restored balances %d %d", a, b)
	}
	if node2, _ := n2.NodeID("bob"); node2 != node {
		t.Fatal("node key changed")
	}
	alice2, _ := n2.Wallet("alice")
	_, err = alice2.PayInvoice(ctx, paid.Bolt11)
	wantCode(t, err, payments.CodePaymentFailed)
	if _, err := alice2.PayInvoice(ctx, open.Bolt11); err != nil {
		t.Fatal(err)
	}
	if b := balance(t, n2, "bob"); b != 3000 {
		t.Fatalf("bob %d", b)
	}
}
