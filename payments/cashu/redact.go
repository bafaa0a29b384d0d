package cashu

import (
	"fmt"
	"log/slog"
)

// Proofs, outputs and tokens are bearer secrets: whoever reads one can
// spend it. Their String, GoString and LogValue show amounts and keyset
// ids only, so no %v, %#v or slog line can leak one by accident.

func (p Proof) String() string {
	return fmt.Sprintf("cashu.Proof{%d %s, secret redacted}", p.Amount, p.ID)
}

// GoString redacts like String, for %#v.
func (p Proof) GoString() string { return p.String() }

// LogValue redacts like String, for log/slog.
func (p Proof) LogValue() slog.Value {
	return slog.GroupValue(slog.Uint64("amount", p.Amount), slog.String("keyset", p.ID))
}

func (o Output) String() string {
	return fmt.Sprintf("cashu.Output{%d %s, secret redacted}", o.Message.Amount, o.Message.ID)
}

// GoString redacts like String, for %#v.
func (o Output) GoString() string { return o.String() }

// LogValue redacts like String, for log/slog.
func (o Output) LogValue() slog.Value {
	return slog.GroupValue(slog.Uint64("amount", o.Message.Amount), slog.String("keyset", o.Message.ID))
}

func (t Token) String() string {
	total, _ := SumProofs(t.Proofs)
	return fmt.Sprintf("cashu.Token{%d %s in %d proofs from %s, redacted}", total, t.Unit, len(t.Proofs), t.Mint)
}

// GoString redacts like String, for %#v.
func (t Token) GoString() string { return t.String() }

// LogValue redacts like String, for log/slog.
func (t Token) LogValue() slog.Value {
	total, _ := SumProofs(t.Proofs)
	return slog.GroupValue(slog.String("mint", t.Mint), slog.String("unit", t.Unit),
		slog.Uint64("amount", total), slog.Int("proofs", len(t.Proofs)))
}
