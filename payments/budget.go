package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cvmgo/cvm/internal/flockfile"
)

// Reasons a Budget refuses a payment. Each error a Budget returns wraps
// ErrBudget and one of these.
var (
	ErrBudget      = errors.New("payment refused by the budget")
	ErrNoCap       = errors.New("no per-call cap: payments need one")
	ErrOverCap     = errors.New("price over the per-call cap")
	ErrOverDaily   = errors.New("price over what is left of a daily limit")
	ErrNotAllowed  = errors.New("server not allowed to charge")
	ErrUnitUnknown = errors.New("price in a unit the budget does not hold")
	// ErrNegative is a negative limit, which must not read as "no limit",
	// or a negative price, which must not lower what was spent.
	ErrNegative = errors.New("negative amount")
)

// budgetLockTimeout bounds the wait for the lock of a budget file: a
// process holds it only for one read and one write.
const budgetLockTimeout = 5 * time.Second

// Budget is what a client may spend: a cap per call, which every payment
// needs, limits per day overall and per server, and the servers allowed to
// charge. Daily totals are kept in Path, a small file that concurrent
// processes share under a lock held for one transaction, or in memory when
// Path is empty. Days are UTC days.
type Budget struct {
	Unit            string // the unit of every amount here; "sats" when empty
	PerCall         int64  // the most one call may cost; 0: no payment at all
	PerServerPerDay int64  // 0: no limit
	PerDay          int64  // 0: no limit; a negative limit refuses every payment
	Allow           []string
	Path            string
	Now             func() time.Time

	mu  sync.Mutex
	mem budgetState
}

type budgetState struct {
	Day     string           `json:"day"`
	Total   int64            `json:"total"`
	Servers map[string]int64 `json:"servers"`
}

func (b *Budget) unit() string {
	if b.Unit == "" {
		return "sats"
	}
	return b.Unit
}

func (b *Budget) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Check says whether a price would be refused by the cap, the unit or the
// allow list, without spending anything.
func (b *Budget) Check(server string, amount int64, unit string) error {
	if unit == "" {
		unit = "sats"
	}
	switch {
	case b.PerCall < 0 || b.PerServerPerDay < 0 || b.PerDay < 0:
		return fmt.Errorf("%w: %w: a limit is below zero (per call %d, per server per day %d, per day %d)", ErrBudget, ErrNegative, b.PerCall, b.PerServerPerDay, b.PerDay)
	case amount < 0:
		return fmt.Errorf("%w: %w: a price of %d %s", ErrBudget, ErrNegative, amount, unit)
	case unit != b.unit():
		return fmt.Errorf("%w: %w: %d %s against a budget in %s", ErrBudget, ErrUnitUnknown, amount, unit, b.unit())
	case len(b.Allow) > 0 && !slices.Contains(b.Allow, server):
		return fmt.Errorf("%w: %w: %s", ErrBudget, ErrNotAllowed, server)
	case b.PerCall <= 0:
		return fmt.Errorf("%w: %w", ErrBudget, ErrNoCap)
	case amount > b.PerCall:
		return fmt.Errorf("%w: %w: %d %s, cap %d", ErrBudget, ErrOverCap, amount, unit, b.PerCall)
	}
	return nil
}

// Reserve checks a payment of amount to server and counts it against the
// daily limits before it is made. If the payment then fails, Refund gives
// the amount back.
func (b *Budget) Reserve(ctx context.Context, server string, amount int64, unit string) error {
	if err := b.Check(server, amount, unit); err != nil {
		return err
	}
	return b.reserve(ctx, server, amount)
}

// ReserveDeposit is Reserve for the deposit of a prepaid payment channel:
// it counts against the daily limits like any payment, but not against
// PerCall, which bounds the price of each call the deposit then pays for
// (and which must still be set: a budget without a cap pays nothing).
func (b *Budget) ReserveDeposit(ctx context.Context, server string, amount int64, unit string) error {
	if err := b.Check(server, 0, unit); err != nil {
		return err
	}
	if amount < 0 {
		return fmt.Errorf("%w: %w: a deposit of %d", ErrBudget, ErrNegative, amount)
	}
	return b.reserve(ctx, server, amount)
}

// reserve counts amount against the daily limits.
func (b *Budget) reserve(ctx context.Context, server string, amount int64) error {
	return b.update(ctx, func(s *budgetState) error {
		if b.PerDay > 0 && s.Total+amount > b.PerDay {
			return fmt.Errorf("%w: %w: %d %s spent today of %d, this costs %d", ErrBudget, ErrOverDaily, s.Total, b.unit(), b.PerDay, amount)
		}
		if b.PerServerPerDay > 0 && s.Servers[server]+amount > b.PerServerPerDay {
			return fmt.Errorf("%w: %w: %d %s spent today with this server of %d, this costs %d", ErrBudget, ErrOverDaily, s.Servers[server], b.unit(), b.PerServerPerDay, amount)
		}
		s.Total += amount
		s.Servers[server] += amount
		return nil
	})
}

// Refund gives back a reservation whose payment was not made.
func (b *Budget) Refund(ctx context.Context, server string, amount int64) error {
	return b.update(ctx, func(s *budgetState) error {
		s.Total = max(0, s.Total-amount)
		s.Servers[server] = max(0, s.Servers[server]-amount)
		return nil
	})
}

// Spent is today's total and today's total with server.
func (b *Budget) Spent(ctx context.Context, server string) (total, withServer int64, err error) {
	err = b.update(ctx, func(s *budgetState) error {
		total, withServer = s.Total, s.Servers[server]
		return nil
	})
	return total, withServer, err
}

// Today is what was spent today: in all, and with each server (keyed as
// Reserve was given them), for a report of the budget.
func (b *Budget) Today(ctx context.Context) (total int64, servers map[string]int64, err error) {
	err = b.update(ctx, func(s *budgetState) error {
		total, servers = s.Total, maps.Clone(s.Servers)
		return nil
	})
	return total, servers, err
}

func (b *Budget) update(ctx context.Context, f func(s *budgetState) error) error {
	day := b.now().UTC().Format(time.DateOnly)
	fresh := func(s *budgetState) {
		if s.Day != day {
			*s = budgetState{Day: day}
		}
		if s.Servers == nil {
			s.Servers = map[string]int64{}
		}
	}
	if b.Path == "" {
		b.mu.Lock()
		defer b.mu.Unlock()
		fresh(&b.mem)
		return f(&b.mem)
	}
	return flockfile.Update(ctx, b.Path, 0o600, budgetLockTimeout, func(old []byte) ([]byte, error) {
		var s budgetState
		if len(old) > 0 {
			if err := json.Unmarshal(old, &s); err != nil {
				return nil, fmt.Errorf("budget file %s: %w", b.Path, err)
			}
		}
		fresh(&s)
		if err := f(&s); err != nil {
			return nil, err
		}
		return json.Marshal(s)
	})
}
