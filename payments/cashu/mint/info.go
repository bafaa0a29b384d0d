package mint

import (
	"github.com/cvmgo/cvm/payments/cashu"
)

// Version is the mint's name and version in GET /v1/info.
const Version = "cvm-mint-sim/1"

// Info answers NUT-06: who the mint is and which NUTs it supports, with
// the bolt11 limits of minting and melting.
func (m *Mint) Info() cashu.MintInfo {
	lo, hi := uint64(1), m.opts.MaxAmount
	method := []cashu.MethodSetting{{Method: "bolt11", Unit: Unit, MinAmount: &lo, MaxAmount: &hi}}
	name := m.opts.Name
	if name == "" {
		name = "cvm mint-sim"
	}
	return cashu.MintInfo{
		Name:        name,
		Version:     Version,
		Description: m.opts.Description,
		Time:        m.now().Unix(),
		Nuts: map[string]any{
			"4":  cashu.MethodSettings{Methods: []cashu.MethodSetting{{Method: "bolt11", Unit: Unit, MinAmount: &lo, MaxAmount: &hi, Options: map[string]any{"description": true}}}},
			"5":  cashu.MethodSettings{Methods: method},
			"7":  cashu.Supported{Supported: true},
			"8":  cashu.Supported{Supported: true},
			"12": cashu.Supported{Supported: true},
		},
	}
}
