package discovery

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"strconv"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments"
)

// Price is an announced price: Amount is a decimal number or a range
// "MIN-MAX", in Unit. A price whose tag names the capability but cannot be
// read has Unknown set to the reason: such a capability is priced, at a
// price nobody can tell, which is neither free nor cheap.
type Price struct {
	Amount  string `json:"amount"`
	Unit    string `json:"unit"`
	Unknown string `json:"unknown,omitempty"`
	// Sats is, for a price in usd, what it comes to in sats at a rate
	// the viewer chose (InSats), rounded up as a server rounds it: "52",
	// or "52-104" for a range. It is shown beside the price, never paid
	// from: the server states the amount to pay.
	Sats string `json:"sats,omitempty"`
}

// InSats is p with Sats set at usdPerBTC US dollars a bitcoin; p itself
// when it is not a readable price in usd.
func (p *Price) InSats(usdPerBTC *big.Rat) *Price {
	if p == nil || p.Unknown != "" || p.Unit != payments.UnitUSD {
		return p
	}
	lo, hi, err := contextvm.Price{Capability: "tool:x", Amount: p.Amount}.Range()
	if err != nil {
		return p
	}
	low, err := payments.SatsFor(payments.Exact(lo), usdPerBTC)
	if err != nil {
		return p
	}
	high, err := payments.SatsFor(payments.Exact(hi), usdPerBTC)
	if err != nil {
		return p
	}
	out := *p
	out.Sats = strconv.FormatInt(low, 10)
	if high != low {
		out.Sats += "-" + strconv.FormatInt(high, 10)
	}
	return &out
}

// High is the most a call can cost: the top of a range, 0 for a free
// capability (p nil), +Inf for an unknown price, which no bound admits and
// no ranking puts first.
func (p *Price) High() float64 {
	if p == nil {
		return 0
	}
	if p.Unknown != "" {
		return math.Inf(1)
	}
	_, hi, err := contextvm.Price{Capability: "tool:x", Amount: p.Amount}.Range()
	if err != nil {
		return math.Inf(1)
	}
	return hi
}

// String is the price for a person: "free", "10 sats", "5-20 usd",
// "0.05 usd (≈ 52 sats)" or "unknown (why)".
func (p *Price) String() string {
	switch {
	case p == nil:
		return "free"
	case p.Unknown != "":
		return "price unknown (" + p.Unknown + ")"
	case p.Sats != "":
		return p.Amount + " " + p.Unit + " (≈ " + p.Sats + " sats)"
	}
	return p.Amount + " " + p.Unit
}

// priceBook is what a server's cap tags say, by capability ("tool:NAME",
// "prompt:NAME", "resource:URI").
type priceBook map[string]*Price

// capabilityNames are the capabilities a server lists, by kind, for
// resolving the bare names of its server announcement.
type capabilityNames map[string]map[string]bool

// readPrices reads the cap tags of one event found where list says (see
// contextvm.ReadCapTag). A readable price of a capability beats an
// unreadable one on the same event; a bare name on the server announcement
// is resolved against names, and one that is on no list is reported in
// warnings, as is a bare name on a list that the list does not have.
func readPrices(tags nostr.Tags, list string, names capabilityNames) (book priceBook, warnings []string) {
	book = priceBook{}
	put := func(p contextvm.Price, err error) {
		if _, ok := book[p.Capability]; ok && err != nil {
			return
		}
		book[p.Capability] = PriceOf(p)
	}
	for _, t := range tags {
		if len(t) == 0 || t[0] != contextvm.TagCap {
			continue
		}
		p, err := contextvm.ReadCapTag(t, list)
		switch {
		case p.Capability != "":
			if list != "" && !contextvm.HasPrefix(t[1]) && !names[list][t[1]] {
				warnings = append(warnings, fmt.Sprintf("cap %q: the %s list has no such %s", shortText(t[1]), list, list))
				continue
			}
			put(p, err)
		case len(t) > 1 && list == "":
			// A bare name on the server announcement: whatever the server
			// lists under it.
			found := false
			for _, kind := range []string{"tool", "prompt", "resource"} {
				if names[kind][t[1]] {
					found = true
					put(contextvm.ReadCapTag(t, kind))
				}
			}
			if !found {
				warnings = append(warnings, fmt.Sprintf("cap %q names no tool, prompt or resource of the server", shortText(t[1])))
			}
		default:
			warnings = append(warnings, fmt.Sprintf("cap tag %q: %v", shortText(fmt.Sprint([]string(t))), err))
		}
	}
	return book, warnings
}

// PriceOf is p as a catalog shows it: unknown when p does not validate.
func PriceOf(p contextvm.Price) *Price {
	out := &Price{Amount: p.Amount, Unit: p.Unit}
	switch {
	case p.Validate() == nil:
	case p.Amount == "":
		out.Unknown = "no amount"
	default:
		out.Unknown = fmt.Sprintf("amount %q", shortText(p.Amount))
	}
	return out
}

// shortText bounds text taken from an announcement before it is shown.
func shortText(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// listKinds are the lists whose cap tags name capabilities of one kind.
var listKinds = []struct {
	kind nostr.Kind
	name string
}{
	{contextvm.KindToolsList, "tool"},
	{contextvm.KindResourcesList, "resource"},
	{contextvm.KindResourceTemplatesList, "resource"},
	{contextvm.KindPromptsList, "prompt"},
}

// prices reads every cap tag the server announced. Prices on a list win
// over the same capability priced on the server announcement.
func (s *serverState) prices() (priceBook, []string) {
	names := capabilityNames{"tool": {}, "prompt": {}, "resource": {}}
	for _, t := range s.tools {
		names["tool"][t.Name] = true
	}
	for _, p := range s.prompts {
		names["prompt"][p.Name] = true
	}
	for _, r := range s.res {
		names["resource"][r.URI] = true
	}
	for _, t := range s.tmpl {
		names["resource"][t.URITemplate] = true
	}
	book, warnings := readPrices(s.events[contextvm.KindServerAnnouncement].Tags, "", names)
	for _, l := range listKinds {
		evt, ok := s.events[l.kind]
		if !ok {
			continue
		}
		listed, w := readPrices(evt.Tags, l.name, names)
		maps.Copy(book, listed)
		warnings = append(warnings, w...)
	}
	return book, warnings
}
