package payments_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cvmgo/cvm/payments"
)

func TestPricer_FixedRangeComputedWaiveRefuse(t *testing.T) {
	ctx := context.Background()
	fixed := payments.Cap{Capability: "tool:a", Low: 10, High: 10, Unit: "sats"}
	rng := payments.Cap{Capability: "tool:b", Low: 5, High: 20, Unit: "sats"}
	if q, err := payments.Resolve(ctx, nil, payments.PriceRequest{Cap: fixed}); err != nil || q.Amount != 10 || q.Waive {
		t.Fatalf("fixed: %+v %v", q, err)
	}
	if q, err := payments.Resolve(ctx, nil, payments.PriceRequest{Cap: rng}); err != nil || q.Amount != 5 {
		t.Fatalf("range, announced: %+v %v", q, err)
	}
	byLength := payments.PricerFunc(func(_ context.Context, r payments.PriceRequest) (payments.Quote, error) {
		switch n := int64(len(r.Params)); {
		case n == 2:
			return payments.Quote{Waive: true}, nil
		case n > 100:
			return payments.Quote{}, payments.Refuse("too long")
		default:
			return payments.Quote{Amount: n}, nil
		}
	})
	if q, err := payments.Resolve(ctx, byLength, payments.PriceRequest{Cap: rng, Params: []byte(`{"x":1234}`)}); err != nil || q.Amount != 10 {
		t.Fatalf("computed: %+v %v", q, err)
	}
	if q, err := payments.Resolve(ctx, byLength, payments.PriceRequest{Cap: rng, Params: []byte(`{}`)}); err != nil || !q.Waive {
		t.Fatalf("waived: %+v %v", q, err)
	}
	if _, err := payments.Resolve(ctx, byLength, payments.PriceRequest{Cap: rng, Params: make([]byte, 101)}); !errors.Is(err, payments.ErrRefused) {
		t.Fatalf("refused: %v", err)
	}
	if _, err := payments.Resolve(ctx, byLength, payments.PriceRequest{Cap: rng, Params: make([]byte, 30)}); !errors.Is(err, payments.ErrOutOfRange) {
		t.Fatalf("out of range: %v", err)
	}
}

func TestFakeRail_MovesExactlyThePriceOnce(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"memory", "file"} {
		t.Run(name, func(t *testing.T) {
			var server, client *payments.Ledger
			if name == "memory" {
				server = payments.NewLedger(map[string]int64{"alice": 100})
				client = server
			} else {
				path := filepath.Join(t.TempDir(), "ledger.json")
				server, client = payments.OpenLedger(path), payments.OpenLedger(path)
				if err := client.Fund(ctx, "alice", 100); err != nil {
					t.Fatal(err)
				}
			}
			proc := &payments.FakeProcessor{Ledger: server, Payee: "srv"}
			h := &payments.FakeHandler{Ledger: client, Payer: "alice"}
			req, err := proc.Require(ctx, payments.Charge{Amount: 30, RequestID: "r1", Client: "c"})
			if err != nil {
				t.Fatal(err)
			}
			if req.PayReq != "fake:r1:c:30" || req.PMI != payments.PMIFake {
				t.Fatalf("payment required: %+v", req)
			}
			if _, err := h.Pay(ctx, req, 29); err == nil {
				t.Fatal("paid over maxAmount")
			}
			verified := make(chan error, 1)
			go func() { verified <- proc.Verify(ctx, payments.Charge{}, req) }()
			if _, err := h.Pay(ctx, req, 30); err != nil {
				t.Fatal(err)
			}
			if err := <-verified; err != nil {
				t.Fatal(err)
			}
			if _, err := h.Pay(ctx, req, 30); !errors.Is(err, payments.ErrNotPayable) {
				t.Fatalf("paid twice: %v", err)
			}
			a, _ := client.Balance(ctx, "alice")
			s, _ := server.Balance(ctx, "srv")
			if a != 70 || s != 30 {
				t.Fatalf("balances alice %d srv %d, want 70 and 30", a, s)
			}
		})
	}
}

func TestFakeRail_ExpiresAndRefusesBadRequests(t *testing.T) {
	ctx := context.Background()
	l := payments.NewLedger(map[string]int64{"alice": 5})
	proc := &payments.FakeProcessor{Ledger: l, Payee: "srv", TTL: 50 * time.Millisecond}
	h := &payments.FakeHandler{Ledger: l, Payer: "alice"}
	req, _ := proc.Require(ctx, payments.Charge{Amount: 10, RequestID: "r", Client: "c"})
	var we *payments.WalletError
	if _, err := h.Pay(ctx, req, 10); !errors.As(err, &we) || we.Code != payments.CodeInsufficientBalance {
		t.Fatalf("insufficient balance: %v", err)
	}
	if err := proc.Verify(ctx, payments.Charge{}, req); !errors.Is(err, payments.ErrExpired) {
		t.Fatalf("verify of an unpaid request: %v, want expired", err)
	}
	if _, err := h.Pay(ctx, req, 10); !errors.Is(err, payments.ErrExpired) {
		t.Fatalf("pay of an expired request: %v", err)
	}
	lying := req
	lying.Amount = 1
	if _, err := h.Pay(ctx, lying, 10); !errors.Is(err, payments.ErrNotPayable) {
		t.Fatalf("a request for another amount than the price: %v", err)
	}
	if _, err := h.Pay(ctx, payments.PaymentRequired{PayReq: "lnbc1…"}, 10); !errors.Is(err, payments.ErrNotPayable) {
		t.Fatalf("malformed: %v", err)
	}
	if b, _ := l.Balance(ctx, "alice"); b != 5 {
		t.Fatalf("alice has %d after failed payments, want 5", b)
	}
}

func TestBudget_RefusesAndSharesDailyTotals(t *testing.T) {
	ctx := context.Background()
	b := &payments.Budget{PerCall: 10, PerDay: 25, PerServerPerDay: 15, Allow: []string{"s1", "s2"}}
	for _, c := range []struct {
		server string
		amount int64
		unit   string
		want   error
	}{
		{"s1", 5, "usd", payments.ErrUnitUnknown},
		{"s3", 5, "sats", payments.ErrNotAllowed},
		{"s1", 11, "sats", payments.ErrOverCap},
	} {
		if err := b.Reserve(ctx, c.server, c.amount, c.unit); !errors.Is(err, c.want) || !errors.Is(err, payments.ErrBudget) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (&payments.Budget{}).Check("s", 1, ""); !errors.Is(err, payments.ErrNoCap) {
		t.Errorf("no cap: %v", err)
	}
	// A negative limit is no "no limit", and a negative price no refund.
	for _, nb := range []*payments.Budget{{PerCall: -5}, {PerCall: 10, PerDay: -1}, {PerCall: 10, PerServerPerDay: -1}} {
		if err := nb.Reserve(ctx, "s1", 1, ""); !errors.Is(err, payments.ErrNegative) || !errors.Is(err, payments.ErrBudget) {
			t.Errorf("%+v: %v", nb, err)
		}
	}
	if err := b.Reserve(ctx, "s1", -10, ""); !errors.Is(err, payments.ErrNegative) {
		t.Errorf("a negative price: %v", err)
	}
	if err := b.Reserve(ctx, "s1", 10, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, "s1", 6, ""); !errors.Is(err, payments.ErrOverDaily) {
		t.Fatalf("per server per day: %v", err)
	}
	if err := b.Reserve(ctx, "s2", 10, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, "s2", 6, ""); !errors.Is(err, payments.ErrOverDaily) {
		t.Fatalf("per day: %v", err)
	}

	// Processes sharing a file never spend more than the daily limit.
	path := filepath.Join(t.TempDir(), "budget.json")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Go(func() {
			own := &payments.Budget{PerCall: 10, PerDay: 35, Path: path}
			for range 5 {
				if own.Reserve(ctx, "s", 10, "sats") == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total, _, _ := (&payments.Budget{Path: path}).Spent(ctx, "s")
	if ok != 3 || total != 30 {
		t.Fatalf("%d reservations, %d spent; want 3 and 30", ok, total)
	}
}

// A channel's deposit is above the per-call cap and still counts against
// the daily limits; a budget without a cap pays no deposit either.
func TestBudget_ReserveDeposit(t *testing.T) {
	ctx := context.Background()
	b := &payments.Budget{PerCall: 2, PerDay: 60}
	if err := b.Reserve(ctx, "s", 50, "sats"); !errors.Is(err, payments.ErrOverCap) {
		t.Fatalf("a 50-sat price on a 2-sat cap: %v", err)
	}
	if err := b.ReserveDeposit(ctx, "s", 50, "sats"); err != nil {
		t.Fatalf("a 50-sat deposit: %v", err)
	}
	if err := b.ReserveDeposit(ctx, "s", 20, "sats"); !errors.Is(err, payments.ErrOverDaily) {
		t.Fatalf("20 more on a 60-sat day with 50 spent: %v", err)
	}
	if total, _, _ := b.Spent(ctx, "s"); total != 50 {
		t.Fatalf("spent %d; want 50", total)
	}
	if err := (&payments.Budget{}).ReserveDeposit(ctx, "s", 1, "sats"); !errors.Is(err, payments.ErrNoCap) {
		t.Fatalf("no cap: %v", err)
	}
	if err := b.ReserveDeposit(ctx, "s", -1, "sats"); !errors.Is(err, payments.ErrNegative) {
		t.Fatalf("a negative deposit: %v", err)
	}
}
