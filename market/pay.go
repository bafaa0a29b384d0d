package market

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// paidLog collects the payments made for one call.
type paidLog struct {
	mu   sync.Mutex
	paid []Payment
}

func (l *paidLog) add(r contextvm.PaymentReport) {
	if !r.Paid || r.Accepted || r.Rejected {
		return // a report of what the server said of a payment made
	}
	server := r.Server
	if pk, err := nostrx.ParsePublicKey(server); err == nil {
		server = nostrx.EncodeNpub(pk.Key)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paid = append(l.paid, Payment{Server: server, Amount: r.Amount, Unit: r.Unit, PMI: r.PMI})
}

func (l *paidLog) list() []Payment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Payment{}, l.paid...)
}

// payer is the Payer of one call: the market's payment options, its
// payments reported to paid, and each confirmed by the host when it can
// be asked.
func (m *Market) payer(req *mcp.CallToolRequest, paid *paidLog) contextvm.Payer {
	if m.opts.Pay == nil {
		return nil
	}
	po := *m.opts.Pay
	report := po.Report
	po.Report = func(r contextvm.PaymentReport) {
		paid.add(r)
		if report != nil {
			report(r)
		}
	}
	if req != nil && req.Session != nil && elicits(req.Session) {
		po.Confirm = askHost(req.Session)
	}
	return po.Payer()
}

// inlineElicitBefore is the first protocol version on which a server may
// no longer send elicitation/create while it serves a request (SEP-2322:
// it returns input requests for the host to answer and call again).
const inlineElicitBefore = "2026-07-28"

// elicits reports whether the host can be asked during a call: it
// declared MCP elicitation, on a protocol version that lets the market ask
// while it serves the call. A payment is made inside the provider's call,
// which cannot be suspended for a multi round-trip request: hosts on later
// versions get the configured policy.
func elicits(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.ProtocolVersion < inlineElicitBefore
}

// askHost asks the host's user to approve a payment: accepted pays.
func askHost(ss *mcp.ServerSession) func(context.Context, contextvm.PaymentOffer) bool {
	return func(ctx context.Context, o contextvm.PaymentOffer) bool {
		server := o.Server
		if pk, err := nostrx.ParsePublicKey(server); err == nil {
			server = nostrx.EncodeNpub(pk.Key)
		}
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{
			Message:         fmt.Sprintf("Pay %d %s to %s for %s?", o.Amount, o.Unit, server, o.Capability),
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		})
		return err == nil && res.Action == "accept"
	}
}

// affordable refuses a call no provider of which the budget could pay,
// before anything is sent. Prices in units the budget does not hold are
// left to the payer, which converts or declines them.
func (m *Market) affordable(ctx context.Context, providers []discovery.Provider) error {
	var why string
	for _, p := range providers {
		price := p.Tool.Price
		if price == nil || price.High() <= 0 || cmp.Or(price.Unit, contextvm.DefaultPriceUnit) != "sats" {
			return nil
		}
		left, limit, err := m.left(ctx, p.Server.Pubkey.Hex())
		if err != nil {
			return err
		}
		if price.High() <= float64(left) {
			return nil
		}
		if why == "" {
			why = fmt.Sprintf("%s asks %s and %s", p.Server.Npub, price, limit)
		}
	}
	return fmt.Errorf("over budget: %s; nothing was sent or paid. Ask the user to raise the budget (cvm market --max-sats, --max-sats-per-day, --max-sats-per-server-per-day), or look for a cheaper tool (search with maxPrice)", why)
}

// left is the most the budget pays server now, and which limit says so.
func (m *Market) left(ctx context.Context, server string) (int64, string, error) {
	if m.opts.Pay == nil || m.opts.Pay.Budget == nil || m.opts.Pay.Budget.PerCall <= 0 || len(m.opts.Pay.Handlers)+len(m.opts.Pay.Bearers) == 0 {
		return 0, "the market pays nothing (it runs without --max-sats or without a wallet)", nil
	}
	b := m.opts.Pay.Budget
	if err := b.Check(server, 0, "sats"); err != nil {
		return 0, "the budget refuses this server: " + err.Error(), nil
	}
	total, withServer, err := b.Spent(ctx, server)
	if err != nil {
		return 0, "", fmt.Errorf("reading the budget: %w", err)
	}
	left, limit := b.PerCall, fmt.Sprintf("a call may cost at most %d sats", b.PerCall)
	if b.PerDay > 0 && b.PerDay-total < left {
		left, limit = b.PerDay-total, fmt.Sprintf("%d of the %d sats a day are left", b.PerDay-total, b.PerDay)
	}
	if b.PerServerPerDay > 0 && b.PerServerPerDay-withServer < left {
		left, limit = b.PerServerPerDay-withServer, fmt.Sprintf("%d of the %d sats a day for this server are left", b.PerServerPerDay-withServer, b.PerServerPerDay)
	}
	return left, limit, nil
}
