package interop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cvmgo/cvm/payments/bolt11"
	"github.com/cvmgo/cvm/relay"
	"github.com/cvmgo/cvm/relay/relaytest"
)

// TestPay_AlbyWalletService: cvm's NWC client (payments/nwc, under
// payments/lightning) against a wallet service nobody here wrote, Alby's
// NWCWalletService backed by a ledger in the script: cvm gateway makes its
// invoices there and verifies them by lookup_invoice (srv: the SDK's own
// info event, so NIP-44), cvm call pays there (alice: a legacy info event
// without an encryption tag, so NIP-04), and get_balance shows exactly the
// price moved.
func TestPay_AlbyWalletService(t *testing.T) {
	server := everything(t)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var ready struct {
		Wallets map[string]string `json:"wallets"`
	}
	log := startNode(t, "payments/alby-wallet.mjs", map[string]string{"RELAY_URL": r.URL, "WALLETS": "srv=0,alice=100:nip04"}, &ready)
	sim := walletSim{Wallets: ready.Wallets}
	gw := startGateway(t, "--relay", r.URL, "--price", "tool:get-sum=10", "--wallet-file", walletFile(t, sim.Wallets["srv"]), "--", "node", server)

	code, out, errOut := cvm(t, t.TempDir(), "--json", "call", gw.Npub, "get-sum", "a=2", "b=3", "--relay", r.URL,
		"--wallet-file", walletFile(t, sim.Wallets["alice"]), "--max-sats", "10", "--yes")
	var called struct {
		Content []struct{ Text string }
		Meta    map[string][]struct {
			Amount   int64 `json:"amount"`
			Accepted bool  `json:"accepted"`
		} `json:"_meta"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &called) != nil || len(called.Content) == 0 || !strings.Contains(called.Content[0].Text, "5") {
		t.Fatalf("cvm call paying through Alby's wallet service: %d %s %s; wallet log: %s", code, out, errOut, log.String())
	}
	if ps := called.Meta["cvm/payments"]; len(ps) != 1 || ps[0].Amount != 10 || !ps[0].Accepted {
		t.Errorf("payments reported: %+v", ps)
	}
	wantBalances(t, sim, map[string]int64{"alice": 90_000, "srv": 10_000})
	for _, want := range []string{`{"wallet":"alice","encryption":"nip04"}`, `{"wallet":"srv","encryption":"nip44_v2"}`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("Alby's service never decrypted %s; its log: %s", want, log.String())
		}
	}
	if strings.Contains(log.String(), `{"wallet":"alice","encryption":"nip44_v2"}`) || strings.Contains(log.String(), `{"wallet":"srv","encryption":"nip04"}`) {
		t.Errorf("a wallet was spoken to in the other scheme than its info event offers: %s", log.String())
	}
}

// payerAndPayee runs cvm wallet-sim with a payer (100 sats) and a payee
// on a relay of their own, speaking enc: both schemes (NIP-44 preferred)
// for "nip44_v2", only NIP-04 for "nip04", as a legacy wallet.
func payerAndPayee(t *testing.T, enc string) walletSim {
	t.Helper()
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	args := []string{"payer=100", "payee=0"}
	if enc == "nip04" {
		args = append(args, "--encryption=nip04")
	}
	return startWalletSim(t, r.URL, args...)
}

type albyTx struct {
	Type        string `json:"type"`
	State       string `json:"state"`
	Invoice     string `json:"invoice"`
	PaymentHash string `json:"payment_hash"`
	Preimage    string `json:"preimage"`
	Amount      int64  `json:"amount"`
	SettledAt   int64  `json:"settled_at"`
}

// TestPay_AlbyClientDrivesWalletSim: Alby's NWCClient drives cvm
// wallet-sim: get_info, get_balance, make_invoice, pay_invoice,
// lookup_invoice and get_balance again, with NIP-44 (the simulator's
// default offer) and with NIP-04 (a simulator started with --encryption
// nip04, as a legacy wallet); paying the same invoice twice fails.
func TestPay_AlbyClientDrivesWalletSim(t *testing.T) {
	for _, enc := range []string{"nip44_v2", "nip04"} {
		t.Run(enc, func(t *testing.T) {
			sim := payerAndPayee(t, enc)
			var res struct {
				OK         bool   `json:"ok"`
				Step       string `json:"step"`
				Error      string `json:"error"`
				Encryption string `json:"encryption"`
				PayeeEnc   string `json:"payeeEncryption"`
				Info       struct {
					Network string   `json:"network"`
					Methods []string `json:"methods"`
				} `json:"info"`
				BalanceBefore int64  `json:"balanceBefore"`
				Made          albyTx `json:"made"`
				Paid          struct {
					Preimage string `json:"preimage"`
				} `json:"paid"`
				Looked       albyTx `json:"looked"`
				BalanceAfter int64  `json:"balanceAfter"`
				PayeeBalance int64  `json:"payeeBalance"`
				SecondPay    string `json:"secondPay"`
			}
			runPaymentsScript(t, "alby-client.mjs", map[string]string{
				"PAYER_URI": sim.Wallets["payer"], "PAYEE_URI": sim.Wallets["payee"], "AMOUNT_MSAT": "10000",
			}, struct{}{}, &res)
			if !res.OK {
				t.Fatalf("Alby's client failed in step %s: %s", res.Step, res.Error)
			}
			if res.Encryption != enc || res.PayeeEnc != enc {
				t.Errorf("Alby's client chose %s and %s; want %s", res.Encryption, res.PayeeEnc, enc)
			}
			for _, m := range []string{"get_info", "get_balance", "make_invoice", "pay_invoice", "lookup_invoice"} {
				if !slices.Contains(res.Info.Methods, m) {
					t.Errorf("get_info methods %v lack %s", res.Info.Methods, m)
				}
			}
			if res.Info.Network != "regtest" || res.BalanceBefore != 100_000 {
				t.Errorf("get_info network %q, get_balance %d", res.Info.Network, res.BalanceBefore)
			}
			inv, err := bolt11.Decode(res.Made.Invoice)
			if err != nil || inv.Amount != 10_000 || inv.PaymentHash() != res.Made.PaymentHash || res.Made.Amount != 10_000 || res.Made.State != "pending" {
				t.Errorf("make_invoice: %+v (%v)", res.Made, err)
			}
			preimage, _ := hex.DecodeString(res.Paid.Preimage)
			if h := sha256.Sum256(preimage); hex.EncodeToString(h[:]) != res.Made.PaymentHash {
				t.Errorf("pay_invoice preimage %q does not hash to %s", res.Paid.Preimage, res.Made.PaymentHash)
			}
			if res.Looked.State != "settled" || res.Looked.SettledAt == 0 || res.Looked.Preimage != res.Paid.Preimage || res.Looked.Type != "incoming" {
				t.Errorf("lookup_invoice: %+v", res.Looked)
			}
			if res.BalanceAfter != 90_000 || res.PayeeBalance != 10_000 {
				t.Errorf("balances after: payer %d, payee %d msat", res.BalanceAfter, res.PayeeBalance)
			}
			if res.SecondPay == "paid" || res.SecondPay == "" {
				t.Errorf("paying the same invoice twice: %q", res.SecondPay)
			}
		})
	}
}

// TestPay_AlbyClientHearsWalletSimNotifications: Alby's NWCClient, with
// its own subscribeNotifications, reads cvm wallet-sim's notifications:
// payment_received on the payee's connection and payment_sent on the
// payer's, for the payment just made, with its amount, hash and preimage;
// as kind 23197 (NIP-44) and, from a simulator that speaks only NIP-04,
// as kind 23196.
func TestPay_AlbyClientHearsWalletSimNotifications(t *testing.T) {
	for _, enc := range []string{"nip44_v2", "nip04"} {
		t.Run(enc, func(t *testing.T) {
			sim := payerAndPayee(t, enc)
			type heard struct {
				Type         string `json:"notification_type"`
				Notification albyTx `json:"notification"`
			}
			var res struct {
				OK          bool   `json:"ok"`
				Step        string `json:"step"`
				Error       string `json:"error"`
				Encryption  string `json:"encryption"`
				PaymentHash string `json:"paymentHash"`
				Paid        struct {
					Preimage string `json:"preimage"`
				} `json:"paid"`
				Received heard `json:"received"`
				Sent     heard `json:"sent"`
			}
			runPaymentsScript(t, "alby-notifications.mjs", map[string]string{
				"PAYER_URI": sim.Wallets["payer"], "PAYEE_URI": sim.Wallets["payee"], "AMOUNT_MSAT": "7000",
			}, struct{}{}, &res)
			if !res.OK {
				t.Fatalf("Alby's client failed in step %s: %s", res.Step, res.Error)
			}
			if res.Encryption != enc {
				t.Errorf("Alby's client chose %s; want %s", res.Encryption, enc)
			}
			for _, n := range []struct {
				heard
				typ, txType string
			}{{res.Received, "payment_received", "incoming"}, {res.Sent, "payment_sent", "outgoing"}} {
				tx := n.Notification
				if n.Type != n.typ || tx.Type != n.txType || tx.PaymentHash != res.PaymentHash || tx.Amount != 7000 ||
					tx.Preimage != res.Paid.Preimage || tx.State != "settled" || tx.SettledAt == 0 {
					t.Errorf("%s as Alby's client read it: %+v", n.typ, n.heard)
				}
			}
		})
	}
}

// TestPay_AlbyWalletServiceNotifies: a wallet built from Alby's
// NWCWalletService that sends notifications (the script's own, built with
// the SDK's encrypt and signEvent, as the SDK has no sender) serves cvm
// gateway: the gateway listens (kind 23197: the SDK's info event offers
// NIP-44) on its info event's word, and settles a paid call, which cvm call pays from the same wallet service, on its
// payment_received notification, with no lookup_invoice.
func TestPay_AlbyWalletServiceNotifies(t *testing.T) {
	server := everything(t)
	r := relaytest.Start(t, relay.Options{Limits: relay.Limits{EventsPerSecond: -1}})
	var ready struct {
		Wallets map[string]string `json:"wallets"`
	}
	log := startNode(t, "payments/alby-wallet.mjs", map[string]string{"RELAY_URL": r.URL, "WALLETS": "srv=0,alice=100", "NOTIFY": "1"}, &ready)
	sim := walletSim{Wallets: ready.Wallets}
	gw := startGateway(t, "--relay", r.URL, "--price", "tool:get-sum=10", "--wallet-file", walletFile(t, sim.Wallets["srv"]),
		"--log-level", "debug", "--", "node", server)

	code, out, errOut := cvm(t, t.TempDir(), "--json", "call", gw.Npub, "get-sum", "a=2", "b=3", "--relay", r.URL,
		"--wallet-file", walletFile(t, sim.Wallets["alice"]), "--max-sats", "10", "--yes")
	if code != 0 || !strings.Contains(out, "5") {
		t.Fatalf("cvm call paying through Alby's wallet service: %d %s %s; wallet log: %s", code, out, errOut, log.String())
	}
	wantBalances(t, sim, map[string]int64{"alice": 90_000, "srv": 10_000})
	if !strings.Contains(log.String(), `{"notified":"srv","kind":23197,"accepted":true`) {
		t.Errorf("the wallet sent no NIP-44 notification that anyone heard: %s", log.String())
	}
	wantSettledByNotification(t, gw, sim.Wallets["srv"])
}
