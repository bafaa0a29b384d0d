package contextvm

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/mcpmsg"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Price is what one capability costs (seed 000 "Capability Pricing",
// CEP-8). It travels as a tag, ["cap", Capability, Amount, Unit], on a
// server's announcements and on its list responses. Collecting payment is
// not this type's business: a price here is only advertised.
type Price struct {
	// Capability is "tool:NAME", "prompt:NAME" or "resource:URI".
	Capability string
	// Amount is a non-negative decimal number, or a range "MIN-MAX" for a
	// price that depends on the call.
	Amount string
	// Unit is the unit of Amount; empty means DefaultPriceUnit.
	Unit string
}

// DefaultPriceUnit is the unit of a price that names none.
const DefaultPriceUnit = "sats"

// TagCap is the name of the pricing tag.
const TagCap = "cap"

// ErrBadPrice is wrapped by every error about a malformed price.
var ErrBadPrice = errors.New("bad price")

// ParsePrice reads a price written as CAPABILITY=AMOUNT[:UNIT], for
// example "tool:translate=10", "prompt:review=5-20:sats" or
// "resource:file:///a=b=3:usd". The last "=" separates the capability,
// which may itself contain "=" and ":", from the price.
func ParsePrice(s string) (Price, error) {
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return Price{}, fmt.Errorf("%w %q: want CAPABILITY=AMOUNT[:UNIT], e.g. tool:translate=10", ErrBadPrice, s)
	}
	p := Price{Capability: s[:i]}
	p.Amount, p.Unit, _ = strings.Cut(s[i+1:], ":")
	if p.Unit == "" {
		p.Unit = DefaultPriceUnit
	}
	if err := p.Validate(); err != nil {
		return Price{}, err
	}
	return p, nil
}

// ParseCapTag reads a ["cap", capability, amount, unit] tag. A missing
// unit is DefaultPriceUnit.
func ParseCapTag(t nostr.Tag) (Price, error) {
	if len(t) < 3 || t[0] != TagCap {
		return Price{}, fmt.Errorf("%w: %q is not a [\"cap\", capability, amount, unit] tag", ErrBadPrice, []string(t))
	}
	p := Price{Capability: t[1], Amount: t[2], Unit: DefaultPriceUnit}
	if len(t) > 3 && t[3] != "" {
		p.Unit = t[3]
	}
	if err := p.Validate(); err != nil {
		return Price{}, err
	}
	return p, nil
}

// ReadCapTag reads a cap tag as servers write it, found where list says:
// "tool", "resource" or "prompt" for a list (its announcement, kinds
// 11317–11320, or an answer to tools/list and the like), "" for the server
// announcement (11316). Seed 000's own example names the capability bare,
// ["cap","get_weather","100","sats"], while the reference SDK writes
// "tool:get_weather": on a list, a capability with no "tool:", "prompt:"
// or "resource:" prefix is one of that list's, so a resource URI needs none
// either.
//
// When the tag names a capability but its price cannot be read (no amount,
// a malformed one), the Price is returned as written, Capability set, with
// an error wrapping ErrBadPrice: such a price is unknown, which is not free.
// Capability is empty when the tag names nothing usable, and when it names
// a bare capability outside a list; the second error wraps ErrBareCapability,
// and the caller that knows the server's lists may resolve the name with
// ReadCapTag(t, kind) for the kind that has it.
func ReadCapTag(t nostr.Tag, list string) (Price, error) {
	if len(t) < 2 || t[0] != TagCap || t[1] == "" {
		return Price{}, fmt.Errorf("%w: %q is not a [\"cap\", capability, amount, unit] tag", ErrBadPrice, []string(t))
	}
	p := Price{Capability: t[1], Unit: DefaultPriceUnit}
	if !HasPrefix(p.Capability) {
		if list == "" {
			return Price{}, fmt.Errorf("%w: %q", ErrBareCapability, p.Capability)
		}
		p.Capability = list + ":" + p.Capability
	}
	if len(t) < 3 {
		return p, fmt.Errorf("%w: %s has no amount", ErrBadPrice, p.Capability)
	}
	p.Amount = t[2]
	if len(t) > 3 && t[3] != "" {
		p.Unit = t[3]
	}
	return p, p.Validate()
}

// ErrBareCapability is returned by ReadCapTag for a capability named
// without its kind outside a list.
var ErrBareCapability = errors.New("a capability without tool:, prompt: or resource: outside a list")

// HasPrefix reports whether capability names its kind: "tool:NAME",
// "prompt:NAME" or "resource:URI".
func HasPrefix(capability string) bool {
	kind, name, ok := strings.Cut(capability, ":")
	return ok && name != "" && (kind == "tool" || kind == "prompt" || kind == "resource")
}

// Tag is the price's ["cap", …] tag.
func (p Price) Tag() nostr.Tag {
	unit := p.Unit
	if unit == "" {
		unit = DefaultPriceUnit
	}
	return nostr.Tag{TagCap, p.Capability, p.Amount, unit}
}

// Kind is what the price is for: "tool", "prompt" or "resource".
func (p Price) Kind() string {
	kind, _, _ := strings.Cut(p.Capability, ":")
	return kind
}

// Name is the tool or prompt name, or the resource URI.
func (p Price) Name() string {
	_, name, _ := strings.Cut(p.Capability, ":")
	return name
}

// Range returns the lowest and highest amount (equal for a fixed price).
func (p Price) Range() (low, high float64, err error) {
	if strings.HasPrefix(p.Amount, "-") || strings.Contains(p.Amount, "--") {
		return 0, 0, fmt.Errorf("%w: amount %q: a price cannot be negative (a range is MIN-MAX, e.g. 5-10)", ErrBadPrice, p.Amount)
	}
	lo, hi, isRange := strings.Cut(p.Amount, "-")
	if low, err = parseAmount(lo); err != nil {
		return 0, 0, fmt.Errorf("%w: amount %q: %v", ErrBadPrice, p.Amount, err)
	}
	if !isRange {
		return low, low, nil
	}
	if high, err = parseAmount(hi); err != nil {
		return 0, 0, fmt.Errorf("%w: amount %q: %v", ErrBadPrice, p.Amount, err)
	}
	if high < low {
		return 0, 0, fmt.Errorf("%w: range %q runs backwards", ErrBadPrice, p.Amount)
	}
	return low, high, nil
}

// Validate reports whether the price can be advertised.
func (p Price) Validate() error {
	switch kind, name, _ := strings.Cut(p.Capability, ":"); {
	case kind != "tool" && kind != "prompt" && kind != "resource":
		return fmt.Errorf("%w: capability %q is not tool:NAME, prompt:NAME or resource:URI", ErrBadPrice, p.Capability)
	case name == "":
		return fmt.Errorf("%w: capability %q names nothing", ErrBadPrice, p.Capability)
	}
	if _, _, err := p.Range(); err != nil {
		return err
	}
	if strings.ContainsAny(p.Unit, " \t\n") {
		return fmt.Errorf("%w: unit %q contains spaces", ErrBadPrice, p.Unit)
	}
	return nil
}

// maxAmount is the largest amount a price may name: 2^53, the last integer
// a float64 holds exactly. Amounts become whole numbers (int64) where they
// are charged; past 2^63 that conversion turns negative, and long before,
// no price is real.
const maxAmount = 1 << 53

// parseAmount accepts plain non-negative decimals up to maxAmount: no sign,
// exponent, infinity or NaN, which strconv alone would let through.
func parseAmount(s string) (float64, error) {
	if s == "" {
		return 0, errors.New("no amount")
	}
	dot := false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot:
			dot = true
		default:
			return 0, fmt.Errorf("%q is not a non-negative decimal number, such as 10 or 0.5", s)
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a decimal number, such as 10 or 0.5", s)
	}
	// Compared exactly: as a float64, 2^53+1 is 2^53.
	if r, ok := new(big.Rat).SetString(s); !ok || r.Cmp(big.NewRat(maxAmount, 1)) > 0 {
		return 0, fmt.Errorf("%s is more than any price can be (at most %d)", s, maxAmount)
	}
	return v, nil
}

// PricedCapability names the capability a request uses, as prices name it
// ("tool:NAME", "prompt:NAME", "resource:URI"), for the methods whose
// requests can carry a price: tools/call, prompts/get, resources/read.
func PricedCapability(m *jsonrpc.Request) (string, bool) {
	switch m.Method {
	case "tools/call":
		if n := mcpmsg.StringParam(m.Params, "name"); n != "" {
			return "tool:" + n, true
		}
	case "prompts/get":
		if n := mcpmsg.StringParam(m.Params, "name"); n != "" {
			return "prompt:" + n, true
		}
	case "resources/read":
		if u := mcpmsg.StringParam(m.Params, "uri"); u != "" {
			return "resource:" + u, true
		}
	}
	return "", false
}

// priceTags are the cap tags of prices whose kind is in kinds (all of them
// when kinds is empty).
func priceTags(prices []Price, kinds ...string) nostr.Tags {
	var tags nostr.Tags
	for _, p := range prices {
		if len(kinds) == 0 || slices.Contains(kinds, p.Kind()) {
			tags = append(tags, p.Tag())
		}
	}
	return tags
}
