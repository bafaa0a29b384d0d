package lightning_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"fiatjaf.com/nostr"
	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/lnsim"
	"github.com/cvmgo/cvm/payments/nwc"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

func newNet(t *testing.T, now func() time.Time) *lnsim.Network {
	t.Helper()
	n, err := lnsim.Open(lnsim.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	n.AddWallet("client", 1_000_000)
	n.AddWallet("server", 0)
	return n
}

func sats(t *testing.T, n *lnsim.Network, name string) int64 {
	t.Helper()
	b, err := n.Balance(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPaidThroughNWC runs the whole rail through a relay: the processor
// invoices through the server's NWC connection, the handler pays through
// the client's, the processor verifies by lookup; balances move by exactly
// the price, and the receipt's preimage is the invoice's.
func TestPaidThroughNWC(t *testing.T) {
	r := relaytest.Start(t, relay.Options{})
	net := newNet(t, nil)
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: []string{r.URL}})
	defer pool.Close()
	svc := nwc.NewService(net, pool, nwc.ServiceOptions{})
	serverURI, _ := svc.Connect("server", nostr.Generate(), nostr.Generate())
	clientURI, _ := svc.Connect("client", nostr.Generate(), nostr.Generate())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-svc.Ready()

	serverWallet := nwc.NewClient(serverURI, nwc.ClientOptions{})
	defer serverWallet.Close()
	clientWallet := nwc.NewClient(clientURI, nwc.ClientOptions{})
	defer clientWallet.Close()
	proc := lightning.NewProcessor(serverWallet, lightning.ProcessorOptions{PollMin: 10 * time.Millisecond})
	handler := lightning.NewHandler(clientWallet)

	charge := payments.Charge{Amount: 21, Unit: "sats", Description: "tools/call weather", RequestID: "e1"}
	req, err := proc.Require(ctx, charge)
	if err != nil {
		t.Fatal(err)
	}
	if req.PMI != payments.PMILightningBolt11 || req.Amount != 21 || req.TTL != 300 {
		t.Fatalf("payment required %+v", req)
	}
	receipt, err := handler.Pay(ctx, req, 21)
	if err != nil {
		t.Fatal(err)
	}
	vctx, vcancel := context.WithTimeout(ctx, 10*time.Second)
	defer vcancel()
	if err := proc.Verify(vctx, charge, req); err != nil {
		t.Fatal(err)
	}
	inv, _ := bolt11.Decode(req.PayReq)
	pb, _ := hex.DecodeString(receipt.Preimage)
	if h := sha256.Sum256(pb); hex.EncodeToString(h[:]) != inv.PaymentHash() || receipt.Amount != 21 {
		t.Fatalf("receipt %+v", receipt)
	}
	if c, s := sats(t, net, "client"), sats(t, net, "server"); c != 1_000_000-21_000 || s != 21_000 {
		t.Fatalf("balances client %d server %d msat", c, s)
	}
}

// TestVerifyWaitsForPayment: Verify started before the payment polls
// until it is made.
func TestVerifyWaitsForPayment(t *testing.T) {
	net := newNet(t, nil)
	server, _ := net.Wallet("server")
	client, _ := net.Wallet("client")
	proc := lightning.NewProcessor(server, lightning.ProcessorOptions{PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	charge := payments.Charge{Amount: 5}
	req, err := proc.Require(context.Background(), charge)
	if err != nil {
		t.Fatal(err)
	}
	verified := make(chan error, 1)
	go func() { verified <- proc.Verify(context.Background(), charge, req) }()
	if _, err := lightning.NewHandler(client).Pay(context.Background(), req, 5); err != nil {
		t.Fatal(err)
	}
	if err := <-verified; err != nil {
		t.Fatal(err)
	}
}

// TestPaidLooksOnce: Paid answers from one lookup, without waiting:
// false before the invoice is paid (the wallet's NOT_FOUND included), true
// after; an invoice that is not one is an error.
func TestPaidLooksOnce(t *testing.T) {
	net := newNet(t, nil)
	server, _ := net.Wallet("server")
	client, _ := net.Wallet("client")
	proc := lightning.NewProcessor(server, lightning.ProcessorOptions{})
	charge := payments.Charge{Amount: 5}
	req, err := proc.Require(context.Background(), charge)
	if err != nil {
		t.Fatal(err)
	}
	if paid, err := proc.Paid(context.Background(), charge, req); paid || err != nil {
		t.Fatalf("before paying: %v %v", paid, err)
	}
	other, _ := lightning.NewProcessor(client, lightning.ProcessorOptions{}).Require(context.Background(), charge)
	if paid, err := proc.Paid(context.Background(), charge, other); paid || err != nil {
		t.Fatalf("an invoice the wallet does not know: %v %v", paid, err)
	}
	if _, err := lightning.NewHandler(client).Pay(context.Background(), req, 5); err != nil {
		t.Fatal(err)
	}
	if paid, err := proc.Paid(context.Background(), charge, req); !paid || err != nil {
		t.Fatalf("after paying: %v %v", paid, err)
	}
	if _, err := proc.Paid(context.Background(), charge, payments.PaymentRequired{PayReq: "lnbc1garbage"}); !errors.Is(err, lightning.ErrInvalidInvoice) {
		t.Fatalf("garbage: %v", err)
	}
}

// TestVerifyStops: an unpaid invoice ends Verify at expiry (an injected
// clock past it) or when the context ends.
func TestVerifyStops(t *testing.T) {
	net := newNet(t, nil)
	server, _ := net.Wallet("server")
	later := func() time.Time { return time.Now().Add(time.Hour) }
	proc := lightning.NewProcessor(server, lightning.ProcessorOptions{Now: later})
	req, _ := proc.Require(context.Background(), payments.Charge{Amount: 5})
	if err := proc.Verify(context.Background(), payments.Charge{Amount: 5}, req); !errors.Is(err, lightning.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	proc = lightning.NewProcessor(server, lightning.ProcessorOptions{})
	req, _ = proc.Require(context.Background(), payments.Charge{Amount: 5})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := proc.Verify(ctx, payments.Charge{Amount: 5}, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := proc.Require(context.Background(), payments.Charge{Amount: 5, Unit: "usd"}); !errors.Is(err, lightning.ErrUnit) {
		t.Fatalf("usd: %v", err)
	}
}

// TestVerifyExpiresAtTheDeadline: a wait whose deadline is the invoice's
// expiry (the gate bounds the wait by the invoice's ttl) ends in
// ErrExpired, not in the deadline, when the processor's clock has reached
// the expiry; an invoice paid at the last moment still settles; a wait
// called off, or whose deadline comes before the expiry, ends in ctx's
// error.
func TestVerifyExpiresAtTheDeadline(t *testing.T) {
	// The network's clock is an hour behind: its invoices expire (a
	// minute later by that clock) before the test begins, so a context
	// whose deadline is the expiry has ended when Verify starts, and the
	// processor's clock alone says whether the invoice has expired.
	past := time.Now().Add(-time.Hour)
	net := newNet(t, func() time.Time { return past })
	server, _ := net.Wallet("server")
	client, _ := net.Wallet("client")
	charge := payments.Charge{Amount: 5}
	verify := func(t *testing.T, paid bool, clock time.Duration, ctx func(expiry time.Time) context.Context) error {
		t.Helper()
		req, err := lightning.NewProcessor(server, lightning.ProcessorOptions{TTL: time.Minute, Prepared: -1}).Require(context.Background(), charge)
		if err != nil {
			t.Fatal(err)
		}
		if paid {
			h := lightning.NewHandler(client)
			h.Now = func() time.Time { return past }
			if _, err := h.Pay(context.Background(), req, 5); err != nil {
				t.Fatal(err)
			}
		}
		inv, err := bolt11.Decode(req.PayReq)
		if err != nil {
			t.Fatal(err)
		}
		expiry := inv.ExpiresAt()
		proc := lightning.NewProcessor(server, lightning.ProcessorOptions{Prepared: -1, Now: func() time.Time { return expiry.Add(clock) }})
		return proc.Verify(ctx(expiry), charge, req)
	}
	atExpiry := func(expiry time.Time) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), expiry)
		t.Cleanup(cancel)
		return ctx
	}
	calledOff := func(time.Time) context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}

	t.Run("expired", func(t *testing.T) {
		if err := verify(t, false, 0, atExpiry); !errors.Is(err, lightning.ErrExpired) {
			t.Fatalf("deadline at the expiry, clock at the expiry: %v; want ErrExpired", err)
		}
	})
	t.Run("paid at the last moment", func(t *testing.T) {
		if err := verify(t, true, 0, atExpiry); err != nil {
			t.Fatalf("paid just before the expiry: %v", err)
		}
	})
	t.Run("called off", func(t *testing.T) {
		if err := verify(t, false, 0, calledOff); !errors.Is(err, context.Canceled) || errors.Is(err, lightning.ErrExpired) {
			t.Fatalf("called off after the expiry: %v; want context.Canceled", err)
		}
	})
	t.Run("deadline before the expiry", func(t *testing.T) {
		if err := verify(t, false, -time.Second, atExpiry); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lightning.ErrExpired) {
			t.Fatalf("deadline a second before the expiry: %v; want context.DeadlineExceeded", err)
		}
	})
}

// TestVerifyLookupOutlastsTheExpiry: the lookup Verify makes at the
// invoice's expiry outlasts the wait's deadline, which is the expiry too
// (a relay slow under load; the deadline is a moment later in the gate):
// the invoice has expired (ErrExpired), the wait did not merely run out.
func TestVerifyLookupOutlastsTheExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t, nil) // the bubble's clock, as the processor's
		server, _ := net.Wallet("server")
		charge := payments.Charge{Amount: 5}
		req, err := lightning.NewProcessor(server, lightning.ProcessorOptions{TTL: time.Minute, Prepared: -1}).Require(context.Background(), charge)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := bolt11.Decode(req.PayReq)
		if err != nil {
			t.Fatal(err)
		}
		slow := &slowLookup{Wallet: server}
		proc := lightning.NewProcessor(slow, lightning.ProcessorOptions{Prepared: -1, Now: time.Now})
		ctx, cancel := context.WithDeadline(context.Background(), inv.ExpiresAt())
		defer cancel()
		if err := proc.Verify(ctx, charge, req); !errors.Is(err, lightning.ErrExpired) {
			t.Fatalf("a lookup that outlasts the deadline at the expiry: %v; want ErrExpired", err)
		}
		if slow.calls != 2 {
			t.Fatalf("%d lookups, want 2 (the one that outlasted the wait, the last look)", slow.calls)
		}
	})
}

// slowLookup is a wallet whose first lookup answers only once its
// context has ended.
type slowLookup struct {
	payments.Wallet
	calls int
}

func (w *slowLookup) LookupInvoice(ctx context.Context, hash string) (payments.Invoice, error) {
	w.calls++
	if w.calls == 1 {
		<-ctx.Done()
		return payments.Invoice{}, ctx.Err()
	}
	return w.Wallet.LookupInvoice(ctx, hash)
}

// TestHandlerRefuses: over the cap, expired, a different amount, no
// amount, garbage: refused before paying, and no balance moves.
func TestHandlerRefuses(t *testing.T) {
	ctx := context.Background()
	past := func() time.Time { return time.Now().Add(-time.Hour) }
	net := newNet(t, nil)
	server, _ := net.Wallet("server")
	client, _ := net.Wallet("client")
	h := lightning.NewHandler(client)
	proc := lightning.NewProcessor(server, lightning.ProcessorOptions{})
	req, _ := proc.Require(ctx, payments.Charge{Amount: 100})

	if _, err := h.Pay(ctx, req, 99); !errors.Is(err, lightning.ErrTooExpensive) {
		t.Errorf("over the cap: %v", err)
	}
	wrong := req
	wrong.Amount = 10 // the request says 10 sats, the invoice asks 100
	if _, err := h.Pay(ctx, wrong, 1000); !errors.Is(err, lightning.ErrAmountMismatch) {
		t.Errorf("wrong amount: %v", err)
	}

	oldNet := newNet(t, past)
	oldServer, _ := oldNet.Wallet("server")
	stale, _ := lightning.NewProcessor(oldServer, lightning.ProcessorOptions{TTL: time.Minute}).Require(ctx, payments.Charge{Amount: 100})
	if _, err := h.Pay(ctx, stale, 1000); !errors.Is(err, lightning.ErrExpired) {
		t.Errorf("expired: %v", err)
	}

	key, _ := btcec.NewPrivateKey()
	noAmount, _ := bolt11.Encode(bolt11.Invoice{Currency: bolt11.Regtest, Timestamp: time.Now()}, key)
	if _, err := h.Pay(ctx, payments.PaymentRequired{PMI: payments.PMILightningBolt11, Amount: 100, PayReq: noAmount}, 1000); !errors.Is(err, lightning.ErrNoAmount) {
		t.Errorf("no amount: %v", err)
	}
	if _, err := h.Pay(ctx, payments.PaymentRequired{PMI: payments.PMILightningBolt11, Amount: 100, PayReq: "lnbc1xyz"}, 1000); !errors.Is(err, lightning.ErrInvalidInvoice) {
		t.Errorf("garbage: %v", err)
	}
	if c, s := sats(t, net, "client"), sats(t, net, "server"); c != 1_000_000 || s != 0 {
		t.Fatalf("balances moved: %d %d", c, s)
	}
	// Exactly at the cap is fine.
	if _, err := h.Pay(ctx, req, 100); err != nil {
		t.Fatal(err)
	}
}

// TestHandlerChecksPreimage: a wallet that claims a payment with a wrong
// preimage yields ErrBadPreimage.
func TestHandlerChecksPreimage(t *testing.T) {
	net := newNet(t, nil)
	server, _ := net.Wallet("server")
	req, _ := lightning.NewProcessor(server, lightning.ProcessorOptions{}).Require(context.Background(), payments.Charge{Amount: 1})
	_, err := lightning.NewHandler(liar{}).Pay(context.Background(), req, 1)
	if !errors.Is(err, lightning.ErrBadPreimage) {
		t.Fatalf("error %v", err)
	}
}

type liar struct{ payments.Wallet }

func (liar) PayInvoice(context.Context, string) (string, error) {
	return hex.EncodeToString(make([]byte, 32)), nil
}
