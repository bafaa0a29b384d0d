package lightning_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/internal/waitbuf"
	"github.com/cvmgo/cvm/payments"
	"github.com/cvmgo/cvm/payments/lightning"
	"github.com/cvmgo/cvm/payments/zap"
)

// A zap invoice is paid as any other; when the server shows the zap
// request it is bound to, the handler pays only if that request hashes to
// the invoice's description hash and is for the price. Without one (the
// reference server), the check is skipped, and said so in the log.
func TestHandlerChecksTheZapRequestShown(t *testing.T) {
	ctx := context.Background()
	net := newNet(t, nil)
	client, _ := net.Wallet("client")
	logs := &waitbuf.Buffer{}
	h := lightning.NewHandler(client)
	h.Logger = logs.Logger()

	sk := nostr.Generate()
	zapRequest := func(msat int64) string {
		evt := zap.NewRequest(msat, sk.Public(), []string{"ws://127.0.0.1:1"}, nostr.Now())
		if err := evt.Sign(sk); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(evt)
		return string(b)
	}
	zr := zapRequest(10_000)
	inv, err := net.MakeInvoiceHashed("server", 10_000, sha256.Sum256([]byte(zr)), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	req := func(shown string) payments.PaymentRequired {
		m, _ := json.Marshal(map[string]string{"rail": zap.Rail, "zap_request": shown})
		if shown == "" {
			m = json.RawMessage(`{"rail":"nip57"}`)
		}
		return payments.PaymentRequired{Amount: 10, PayReq: inv.Bolt11, PMI: payments.PMILightningBolt11, Meta: m}
	}
	for name, shown := range map[string]string{
		"for another amount": zapRequest(9_000),
		"not the invoice's":  zapRequest(10_000) + " ",
		"not a zap request":  `{"kind":1}`,
	} {
		if _, err := h.Check(req(shown), 10); !errors.Is(err, zap.ErrMeta) {
			t.Errorf("a zap request %s: %v; want ErrMeta", name, err)
		}
	}
	if _, err := h.Check(req(zr), 10); err != nil {
		t.Errorf("its own zap request: %v", err)
	}
	if strings.Contains(logs.String(), "without its zap request") {
		t.Errorf("a checked zap logged as unchecked: %s", logs)
	}
	if _, err := h.Pay(ctx, req(""), 10); err != nil {
		t.Fatalf("a zap invoice without its zap request: %v", err)
	}
	if !strings.Contains(logs.String(), "paying a zap invoice without its zap request to check") {
		t.Errorf("the skipped check is not logged: %s", logs)
	}
	if c, s := sats(t, net, "client"), sats(t, net, "server"); c != 990_000 || s != 10_000 {
		t.Errorf("balances %d and %d msat; want 990000 and 10000", c, s)
	}
}
