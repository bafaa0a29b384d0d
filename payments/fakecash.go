package payments

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The fake cash payment method is the Fake method's bearer twin, for tests
// and demos only: no money moves. A FakeMint issues notes (a random id and
// a value), each spendable once; a payload is
// "fakecash:<mint>:<id>[,<id>…]", whose value is its notes'. A FakeWallet
// is its Bearer and a FakeRedeemer its Redeemer, so that a test sees value
// move by exactly the price, change come back, and a forged, spent,
// foreign or insufficient payload refused without being consumed. Its
// payment requests are "fakecashreq:<mint>:<amount>".
const PMIFakeCash = "fake-cash-direct"

const (
	fakeCashPrefix = "fakecash:"
	fakeCashReq    = "fakecashreq:"
	// maxFakeNotes bounds the notes of one payload: a parser of untrusted
	// input must not allocate without limit.
	maxFakeNotes = 64
)

// FakeMint issues and spends fake notes (test/demo only).
type FakeMint struct {
	Name string

	mu    sync.Mutex
	notes map[string]*fakeNote
}

type fakeNote struct {
	value int64
	spent bool
}

// NewFakeMint is an empty mint named name (no ':' or ',' in it).
func NewFakeMint(name string) *FakeMint { return &FakeMint{Name: name, notes: map[string]*fakeNote{}} }

// issueLocked makes a new note worth value; m.mu held.
func (m *FakeMint) issueLocked(value int64) string {
	b := make([]byte, 8)
	rand.Read(b)
	id := hex.EncodeToString(b)
	m.notes[id] = &fakeNote{value: value}
	return id
}

// valueOf is the value of the unspent notes ids: ErrInvalidPayload for a
// note the mint never issued, ErrSpent for one spent.
func (m *FakeMint) valueOf(ids []string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.valueLocked(ids)
}

func (m *FakeMint) valueLocked(ids []string) (int64, error) {
	var sum int64
	for _, id := range ids {
		n, ok := m.notes[id]
		switch {
		case !ok:
			return 0, fmt.Errorf("%w: a note %s never issued", ErrInvalidPayload, m.Name)
		case n.spent:
			return 0, fmt.Errorf("%w: a note of %s", ErrSpent, m.Name)
		}
		sum += n.value
	}
	return sum, nil
}

// swap spends the notes ids, all or none, and issues notes worth outs in
// their place (they add up to no more than the notes spent).
func (m *FakeMint) swap(ids []string, outs ...int64) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sum, err := m.valueLocked(ids)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, v := range outs {
		total += v
	}
	if total > sum {
		return nil, fmt.Errorf("%w: %d out of notes worth %d", ErrInsufficient, total, sum)
	}
	for _, id := range ids {
		m.notes[id].spent = true
	}
	news := make([]string, len(outs))
	for i, v := range outs {
		news[i] = m.issueLocked(v)
	}
	return news, nil
}

// FakeCashPayload is the payload of notes ids of mint.
func FakeCashPayload(mint string, ids ...string) string {
	return fakeCashPrefix + mint + ":" + strings.Join(ids, ",")
}

// ParseFakeCash reads a fake cash payload: its mint and notes.
func ParseFakeCash(payload string) (mint string, ids []string, err error) {
	rest, ok := strings.CutPrefix(payload, fakeCashPrefix)
	if !ok {
		return "", nil, fmt.Errorf("%w: not %s<mint>:<notes>", ErrInvalidPayload, fakeCashPrefix)
	}
	mint, list, ok := strings.Cut(rest, ":")
	if !ok || mint == "" || list == "" {
		return "", nil, fmt.Errorf("%w: not %s<mint>:<notes>", ErrInvalidPayload, fakeCashPrefix)
	}
	if strings.Count(list, ",") >= maxFakeNotes {
		return "", nil, fmt.Errorf("%w: more than %d notes", ErrInvalidPayload, maxFakeNotes)
	}
	ids = strings.Split(list, ",")
	for i, id := range ids {
		if id == "" || slices.Contains(ids[:i], id) {
			return "", nil, fmt.Errorf("%w: an empty or repeated note", ErrInvalidPayload)
		}
	}
	return mint, ids, nil
}

// FakeWallet holds fake notes of one mint and pays with them: the Bearer
// of the fake cash method (test/demo only).
type FakeWallet struct {
	Mint *FakeMint

	mu    sync.Mutex
	notes []string // ids held
}

// NewFakeWallet is a wallet holding notes of mint newly issued with values.
func NewFakeWallet(mint *FakeMint, values ...int64) *FakeWallet {
	w := &FakeWallet{Mint: mint}
	mint.mu.Lock()
	for _, v := range values {
		w.notes = append(w.notes, mint.issueLocked(v))
	}
	mint.mu.Unlock()
	return w
}

// PMI is PMIFakeCash.
func (w *FakeWallet) PMI() string { return PMIFakeCash }

// Balance is what the wallet's unspent notes are worth.
func (w *FakeWallet) Balance() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum int64
	for _, id := range w.notes {
		if v, err := w.Mint.valueOf([]string{id}); err == nil {
			sum += v
		}
	}
	return sum
}

// Prepare takes out notes worth at least amount, the smallest first, and
// no more than maxValue. A payment request must name the wallet's mint and
// amount.
func (w *FakeWallet) Prepare(_ context.Context, amount, maxValue int64, payReq string) (Prepared, error) {
	if payReq != "" {
		mint, asked, err := ParseFakeCashRequest(payReq)
		if err != nil {
			return Prepared{}, err
		}
		if mint != w.Mint.Name || asked != amount {
			return Prepared{}, fmt.Errorf("%w: the request asks %d of mint %s", ErrNotPayable, asked, mint)
		}
	}
	if amount <= 0 || amount > maxValue {
		return Prepared{}, fmt.Errorf("%w: %d with at most %d", ErrNotPayable, amount, maxValue)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	type held struct {
		id    string
		value int64
	}
	var notes []held
	for _, id := range w.notes {
		if v, err := w.Mint.valueOf([]string{id}); err == nil {
			notes = append(notes, held{id, v})
		}
	}
	slices.SortFunc(notes, func(a, b held) int { return cmp.Compare(a.value, b.value) })
	// An exact note if there is one, else the smallest that covers, else
	// the smallest notes that add up.
	var pick []string
	var sum int64
	if i := slices.IndexFunc(notes, func(n held) bool { return n.value >= amount }); i >= 0 {
		pick, sum = []string{notes[i].id}, notes[i].value
	} else {
		for _, n := range notes {
			if sum >= amount {
				break
			}
			pick, sum = append(pick, n.id), sum+n.value
		}
	}
	if sum < amount || sum > maxValue {
		return Prepared{}, fmt.Errorf("%w: the wallet cannot make %d within %d (it holds notes worth %d)", ErrNotPayable, amount, maxValue, sum)
	}
	w.notes = slices.DeleteFunc(w.notes, func(id string) bool { return slices.Contains(pick, id) })
	return Prepared{Payload: FakeCashPayload(w.Mint.Name, pick...), Value: sum}, nil
}

// KeepChange swaps the change's notes for new ones only this wallet knows.
func (w *FakeWallet) KeepChange(_ context.Context, payload string) (int64, error) {
	ids, err := w.own(payload)
	if err != nil {
		return 0, err
	}
	value, err := w.Mint.valueOf(ids)
	if err != nil {
		return 0, err
	}
	news, err := w.Mint.swap(ids, value)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	w.notes = append(w.notes, news...)
	w.mu.Unlock()
	return value, nil
}

// Restore puts back a rejected payload's notes, once the mint says they
// are unspent.
func (w *FakeWallet) Restore(_ context.Context, payload string) error {
	ids, err := w.own(payload)
	if err != nil {
		return err
	}
	if _, err := w.Mint.valueOf(ids); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(w.notes, id) {
			w.notes = append(w.notes, id)
		}
	}
	return nil
}

// own reads a payload of the wallet's mint.
func (w *FakeWallet) own(payload string) ([]string, error) {
	mint, ids, err := ParseFakeCash(payload)
	if err != nil {
		return nil, err
	}
	if mint != w.Mint.Name {
		return nil, fmt.Errorf("%w: notes of %s, this wallet holds %s's", ErrForeign, mint, w.Mint.Name)
	}
	return ids, nil
}

// FakeRedeemer is the server side of the fake cash method (test/demo
// only): it redeems payloads of Mint, keeping the price and Fee in Payee
// and returning the rest as change. It is also a Requirer.
type FakeRedeemer struct {
	Mint  *FakeMint
	Payee *FakeWallet // receives what is kept
	Fee   int64       // added to every price
}

// PMI is PMIFakeCash.
func (r *FakeRedeemer) PMI() string { return PMIFakeCash }

// Redeem checks the payload whole, then swaps its notes at once for the
// kept value and the change: a payload spent meanwhile by another request
// is rejected, not consumed.
func (r *FakeRedeemer) Redeem(_ context.Context, c Charge, payload string) (Redeemed, error) {
	if c.Unit != "" && c.Unit != "sats" {
		return Redeemed{}, Reject(fmt.Errorf("%w: a price in %s", ErrForeign, c.Unit), 0)
	}
	mint, ids, err := ParseFakeCash(payload)
	if err != nil {
		return Redeemed{}, Reject(err, 0)
	}
	if mint != r.Mint.Name {
		return Redeemed{}, Reject(fmt.Errorf("%w: mint %.32q", ErrForeign, mint), 0)
	}
	value, err := r.Mint.valueOf(ids)
	if err != nil {
		return Redeemed{}, Reject(err, 0)
	}
	need := c.Amount + r.Fee
	if value < need {
		return Redeemed{}, Reject(fmt.Errorf("%w: worth %d", ErrInsufficient, value), need)
	}
	outs := []int64{need}
	if value > need {
		outs = append(outs, value-need)
	}
	news, err := r.Mint.swap(ids, outs...)
	if err != nil {
		var needed int64
		if errors.Is(err, ErrInsufficient) {
			needed = need
		}
		return Redeemed{}, Reject(err, needed)
	}
	if r.Payee != nil {
		r.Payee.mu.Lock()
		r.Payee.notes = append(r.Payee.notes, news[0])
		r.Payee.mu.Unlock()
	}
	red := Redeemed{Amount: need}
	if len(news) > 1 {
		red.Change, red.ChangeAmount = FakeCashPayload(r.Mint.Name, news[1]), value-need
	}
	return red, nil
}

// Require asks for c.Amount and the fee in notes of the mint.
func (r *FakeRedeemer) Require(_ context.Context, c Charge) (PaymentRequired, error) {
	need := c.Amount + r.Fee
	return PaymentRequired{Amount: need, PMI: PMIFakeCash, Description: c.Description,
		PayReq: fakeCashReq + r.Mint.Name + ":" + strconv.FormatInt(need, 10)}, nil
}

// ParseFakeCashRequest reads a "fakecashreq:<mint>:<amount>" payment
// request.
func ParseFakeCashRequest(payReq string) (mint string, amount int64, err error) {
	rest, ok := strings.CutPrefix(payReq, fakeCashReq)
	mint, n, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || mint == "" {
		return "", 0, fmt.Errorf("%w: %.40q is not %s<mint>:<amount>", ErrNotPayable, payReq, fakeCashReq)
	}
	amount, err = strconv.ParseInt(n, 10, 64)
	if err != nil || amount <= 0 {
		return "", 0, fmt.Errorf("%w: amount %.20q", ErrNotPayable, n)
	}
	return mint, amount, nil
}

var (
	_ Redeemer = (*FakeRedeemer)(nil)
	_ Requirer = (*FakeRedeemer)(nil)
	_ Bearer   = (*FakeWallet)(nil)
)
