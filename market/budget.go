package market

import (
	"context"
	"fmt"
	"slices"

	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BudgetInput takes nothing.
type BudgetInput struct{}

// BudgetOutput is what was spent today and what is left. A limit of 0 is
// no limit; Left is absent where nothing limits it.
type BudgetOutput struct {
	Unit            string        `json:"unit"`
	PerCall         int64         `json:"perCall" jsonschema:"the most one call may cost; 0: the market pays nothing"`
	PerDay          int64         `json:"perDay" jsonschema:"0: no daily limit"`
	PerServerPerDay int64         `json:"perServerPerDay" jsonschema:"0: no daily limit per server"`
	SpentToday      int64         `json:"spentToday"`
	LeftToday       *int64        `json:"leftToday,omitempty"`
	Servers         []ServerSpend `json:"servers"`
	Note            string        `json:"note,omitempty"`
}

// ServerSpend is what was spent today with one server.
type ServerSpend struct {
	Server string `json:"server"`
	Spent  int64  `json:"spent"`
	Left   *int64 `json:"left,omitempty"`
}

func (m *Market) budget(ctx context.Context, _ *mcp.CallToolRequest, _ BudgetInput) (*mcp.CallToolResult, BudgetOutput, error) {
	out := BudgetOutput{Unit: "sats", Servers: []ServerSpend{}}
	if m.opts.Pay == nil || m.opts.Pay.Budget == nil {
		out.Note = "the market pays nothing: it runs without --max-sats"
		return nil, out, nil
	}
	b := m.opts.Pay.Budget
	total, servers, err := b.Today(ctx)
	if err != nil {
		return nil, out, fmt.Errorf("reading the budget: %w", err)
	}
	out.PerCall, out.PerDay, out.PerServerPerDay, out.SpentToday = b.PerCall, b.PerDay, b.PerServerPerDay, total
	if b.PerDay > 0 {
		out.LeftToday = ptr(max(0, b.PerDay-total))
	}
	for server, spent := range servers {
		if spent == 0 {
			continue
		}
		s := ServerSpend{Server: server, Spent: spent}
		if pk, err := nostrx.ParsePublicKey(server); err == nil {
			s.Server = nostrx.EncodeNpub(pk.Key)
		}
		if b.PerServerPerDay > 0 {
			s.Left = ptr(max(0, b.PerServerPerDay-spent))
		}
		out.Servers = append(out.Servers, s)
	}
	slices.SortFunc(out.Servers, func(a, b ServerSpend) int { return int(b.Spent - a.Spent) })
	return nil, out, nil
}

func ptr[T any](v T) *T { return &v }
