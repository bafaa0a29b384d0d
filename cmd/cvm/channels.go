package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"fiatjaf.com/nostr"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/contextvm/cep8"
	"github.com/cvmgo/cvm/durable"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/cvmgo/cvm/payments/channel"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/spf13/cobra"
)

// channelsHelp is the long help of channels.
const channelsHelp = `List the prepaid payment channels of your identity: one Lightning payment
(the deposit, cvm call --channel SATS) to a server, then its priced calls
paid from it with no invoice and no wallet round trip. A channel helps when
you call one server's priced tools many times.

For each channel: the server (an npub, or the URL of an http(s)://
server: channels over HTTP are listed and closed the same way), the
channel's id, its deposit, what was spent
and what is left, when it was last used, and its status: open; owed (the
server closed it, idle past its time to live, with money left in it: the
refund is claimed on your next call to that server or with cvm channels
close); refunded. Amounts in sats; --json gives them in msat.

cvm channels close SERVER (an npub or an http(s):// URL) closes your
channel with SERVER and has it pay back what you did not spend, to an
invoice your wallet makes (--wallet-file or $CVM_WALLET): once, even if it
is interrupted and run again. It claims the refunds owed by channels the
server closed, too.

Channels live in the data directory (channels/, one store per identity:
a channel belongs to the key that opened it); one cvm at a time uses them.`

// channelsCommand is cvm channels and cvm channels close.
func (a *app) channelsCommand() *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:     "channels",
		Short:   "List your prepaid payment channels (deposit, spent, last use)",
		Long:    channelsHelp,
		Example: "  cvm channels\n  cvm channels close npub1…\n  cvm channels close https://mcp.example.com/mcp",
		Args:    positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listChannels(cmd.Context(), key)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "secret key file whose channels to list (default: the configured identity)")
	cmd.AddCommand(a.channelsCloseCommand())
	return cmd
}

func (a *app) channelsCloseCommand() *cobra.Command {
	var cf clientFlags
	var walletFile string
	cmd := &cobra.Command{
		Use:     "close SERVER",
		Short:   "Close your channel with a server and get back what you did not spend",
		Long:    channelsHelp,
		Example: "  cvm channels close npub1… --wallet-file me.wallet\n  cvm channels close https://mcp.example.com/mcp --wallet-file me.wallet",
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.closeChannels(cmd.Context(), cf, walletFile, args[0])
		},
	}
	a.addClientFlags(cmd, &cf, 60*time.Second)
	cmd.Flags().StringVar(&walletFile, "wallet-file", "", "file (mode 0600) holding the wallet connection URI that invoices the refund; else $"+walletEnv)
	config.Bind(cmd.Flags(), "wallet-file", "payments.wallet-file")
	return cmd
}

// addChannelFlag adds --channel to a command that pays for calls.
func addChannelFlag(cmd *cobra.Command, pf *payFlags) {
	f := cmd.Flags()
	f.Int64Var(&pf.channel, "channel", 0, "pay a server that offers prepaid channels from one with this deposit in sats, opened on the first priced call (0: pay each call by invoice)")
	config.Bind(f, "channel", "payments.channel-deposit")
}

// maxChannelSats is the largest deposit servers take: 0.1 BTC.
const maxChannelSats = 10_000_000

// checkChannel refuses a channel deposit that could never be paid, before
// anything is sent.
func (pf payFlags) checkChannel(paid *payLog) error {
	const what = "--channel %d (payments.channel-deposit)"
	switch {
	case pf.channel < 0:
		return fmt.Errorf(what+": a deposit cannot be negative; give it in sats (0, the default, opens no channel)", pf.channel)
	case pf.channel == 0:
		return nil
	case pf.channel > maxChannelSats:
		return fmt.Errorf(what+": servers take a deposit of at most %d sats (0.1 BTC)", pf.channel, maxChannelSats)
	case pf.maxSats <= 0:
		return fmt.Errorf(what+" needs --max-sats (payments.max-sats), the most one call may cost from the channel", pf.channel)
	case paid.wallet == nil:
		return fmt.Errorf(what+" needs a Lightning wallet, to pay the deposit and invoice its refund: give --wallet-file FILE or $%s with a nostr+walletconnect:// URI", pf.channel, walletEnv)
	case pf.perDay > 0 && pf.channel > pf.perDay:
		return fmt.Errorf(what+" is more than --max-sats-per-day %d: the deposit counts against the daily limits; lower --channel or raise payments.max-sats-per-day", pf.channel, pf.perDay)
	case pf.perServerPerDay > 0 && pf.channel > pf.perServerPerDay:
		return fmt.Errorf(what+" is more than --max-sats-per-server-per-day %d: the deposit counts against the daily limits; lower --channel or raise payments.max-sats-per-server-per-day", pf.channel, pf.perServerPerDay)
	}
	return nil
}

// channelOptions adds --channel's channels to pay: the deposit, the wallet
// that invoices refunds, the identity's store. A channel belongs to the
// key that opened it, so the identity must outlive the process: without
// one configured, the default key file is created. It returns what closes
// the store, which the command holds while it runs.
func (a *app) channelOptions(ctx context.Context, pf payFlags, cf clientFlags, pay *cep8.PayOptions, paid *payLog) (func() error, error) {
	if err := pf.checkChannel(paid); err != nil {
		return nil, err
	}
	if pf.channel == 0 {
		return func() error { return nil }, nil
	}
	id, err := a.resolveIdentity(cf.key, serverKey)
	if err != nil {
		return nil, err
	}
	st, err := a.channelStore(ctx, id.pubkey())
	if err != nil {
		return nil, err
	}
	pay.Channel = &cep8.ChannelOptions{DepositSats: pf.channel, Wallet: paid.wallet, Store: st}
	return st.Close, nil
}

// channelStoreWait bounds the wait for another cvm that uses the channels.
const channelStoreWait = 15 * time.Second

// channelStore opens the store of the channels of the identity pk: one
// process at a time, so a second cvm waits for the first to finish.
func (a *app) channelStore(ctx context.Context, pk nostr.PubKey) (*durable.File, error) {
	dir, err := a.dataSubdir("", "channels")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(channelStoreWait)
	for {
		st, err := durable.Open(dir, pk.Hex(), durable.Options{})
		if !errors.Is(err, durable.ErrLocked) {
			return st, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("another cvm with this identity is using its payment channels (a cvm proxy --channel?); wait for it to finish, or pay without --channel: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sessionToOpenChannel makes a call with --channel open an MCP session
// when no channel with the server is open: a stateless request learns
// whether the server offers channels only from its answer, too late to
// open one with it. With a channel open, calls may go stateless.
func (a *app) sessionToOpenChannel(ctx context.Context, cf *clientFlags, serverArg string) {
	if cf.pay == nil || cf.pay.Channel == nil || cf.stateless || isHTTPServer(serverArg) {
		return
	}
	pk, err := a.resolveServer(ctx, serverArg)
	payer, ok := cf.pay.Payer().(*cep8.Payer)
	if err != nil || !ok {
		return
	}
	if _, open := payer.Channel(ctx, pk.Key); !open {
		cf.stateful = true
	}
}

// afterChannelCall tells, once a call with --channel is answered, what
// became of the channel: a server that offers none was paid by invoice
// (one line), and the refunds owed by channels the server closed are
// claimed now, the client's next contact.
func (a *app) afterChannelCall(ctx context.Context, opts contextvm.ClientOptions, sup contextvm.ServerSupport, paid []payment) {
	payer, ok := opts.Payer.(*cep8.Payer)
	if !ok || payer == nil {
		return
	}
	if sup.Known && len(paid) > 0 && !slices.Contains(sup.PMIs, channel.PMI) {
		fmt.Fprintf(a.stderr, "%s offers no payment channels (%s): --channel paid by invoice\n", opts.Server, channel.PMI)
	}
	a.claimRefunds(ctx, payer, opts)
}

// claimRefunds claims what the server's closed channels owe, and says so;
// a failure is only told: the refund stays owed for the next time.
func (a *app) claimRefunds(ctx context.Context, payer *cep8.Payer, opts contextvm.ClientOptions) {
	claimed, err := payer.ClaimRefunds(ctx, opts)
	for _, s := range claimed {
		fmt.Fprintf(a.stderr, "refunded %s sats from channel %s, which the server closed\n", sats(s.Owed), s.Channel)
	}
	if err != nil {
		a.log.Warn("a refund the server owes was not claimed; claimed again on the next call, or with cvm channels close", "server", opts.Server, "err", err)
	}
}

// closeChannels is cvm channels close SERVER: the open channel closed and
// refunded, and the refunds owed claimed.
func (a *app) closeChannels(ctx context.Context, cf clientFlags, walletFile, serverArg string) error {
	pay, paid, err := a.payOptions(payFlags{walletFile: walletFile}, nil)
	if err != nil {
		return err
	}
	defer paid.Close()
	if paid.wallet == nil {
		return fmt.Errorf("closing a channel needs your Lightning wallet (nostr+walletconnect://), to invoice the refund: give --wallet-file FILE or $%s", walletEnv)
	}
	if isHTTPServer(serverArg) {
		pay.Channel = &cep8.ChannelOptions{Wallet: paid.wallet}
		return a.closeHTTPChannel(ctx, cf, pay, serverArg)
	}
	server, err := a.resolveServer(ctx, serverArg)
	if err != nil {
		return err
	}
	id, st, err := a.identityChannels(ctx, cf.key)
	if err != nil {
		return err
	}
	defer st.Close()
	pay.Channel = &cep8.ChannelOptions{Wallet: paid.wallet, Store: st}
	payer := pay.Payer().(*cep8.Payer)
	known := payer.Channels(ctx)[server.Key]
	if len(known) == 0 {
		return fmt.Errorf("you have no channel with %s (identity %s; see cvm channels): channels are opened by cvm call --channel SATS", nostrx.EncodeNpub(server.Key), nostrx.EncodeNpub(id.pubkey()))
	}
	tg, err := a.locate(ctx, cf, serverArg)
	if err != nil {
		return err
	}
	cf.pay = pay
	opts, err := a.clientOptions(cf, tg)
	if err != nil {
		return err
	}
	opts.Payer = payer
	return a.refundChannels(ctx, payer, opts, known)
}

// refundChannels closes the open channel of known (the channels with the
// server of opts) and claims the refunds owed, and prints what came back.
func (a *app) refundChannels(ctx context.Context, payer *cep8.Payer, opts contextvm.ClientOptions, known []channel.State) error {
	var refunded []channel.State
	if !known[0].Closed {
		s, err := payer.CloseChannel(ctx, opts)
		if err != nil {
			return remoteFailure(ctx, "close channel "+known[0].Channel.String(), opts.Server, opts.Relays, err)
		}
		refunded = append(refunded, s)
	}
	claimed, err := payer.ClaimRefunds(ctx, opts)
	refunded = append(refunded, claimed...)
	if perr := a.printRefunds(opts.Server, refunded); perr != nil {
		return perr
	}
	if err != nil {
		return remoteFailure(ctx, "claim refunds", opts.Server, opts.Relays, err)
	}
	return nil
}

// printRefunds prints what came back from the channels with server, or
// that nothing did.
func (a *app) printRefunds(server string, refunded []channel.State) error {
	if a.jsonOut {
		rows := make([]channelRow, 0, len(refunded))
		for _, s := range refunded {
			rows = append(rows, rowOf(server, s))
		}
		return a.printJSON(map[string]any{"refunded": rows})
	}
	for _, s := range refunded {
		fmt.Fprintf(a.stdout, "refunded %s sats of channel %s (deposit %s, spent %s)\n", sats(s.Owed), s.Channel, sats(s.Deposit), sats(s.Accumulated))
	}
	if len(refunded) == 0 {
		fmt.Fprintf(a.stdout, "nothing to refund: your channels with %s are refunded (see cvm channels)\n", server)
	}
	return nil
}

// closeHTTPChannel is cvm channels close URL: the channel with the HTTP
// endpoint closed and refunded (quotation.Buyer.CloseChannel) to an
// invoice of pay.Channel.Wallet, signed as the key that opened it.
func (a *app) closeHTTPChannel(ctx context.Context, cf clientFlags, pay *cep8.PayOptions, url string) error {
	id, st, err := a.identityChannels(ctx, cf.key)
	if err != nil {
		return err
	}
	defer st.Close()
	if len(quotation.Channels(ctx, st)[url]) == 0 {
		return fmt.Errorf("you have no channel with %s (identity %s; see cvm channels): channels are opened by cvm call --channel SATS", url, nostrx.EncodeNpub(id.pubkey()))
	}
	pay.Channel.Store = st
	hc, signer, err := a.httpClient(cf)
	if err != nil {
		return err
	}
	buyer := &quotation.Buyer{URL: url, Client: hc, Pay: pay, Logger: a.log, Signer: signer}
	var refunded []channel.State
	if _, open := buyer.Channel(ctx); open {
		cctx, cancel := context.WithTimeout(ctx, cf.timeout)
		defer cancel()
		s, err := buyer.CloseChannel(cctx)
		if err != nil {
			return remote(fmt.Errorf("close channel with %s: %w", url, err))
		}
		refunded = append(refunded, s)
	}
	return a.printRefunds(url, refunded)
}

// channelRow is one channel as cvm channels --json prints it.
type channelRow struct {
	Server  string    `json:"server"`
	Channel string    `json:"channel"`
	Deposit uint64    `json:"deposit_msat"`
	Spent   uint64    `json:"spent_msat"`
	Unspent uint64    `json:"unspent_msat"`
	Opened  time.Time `json:"opened,omitzero"`
	LastUse time.Time `json:"last_use,omitzero"`
	Closed  time.Time `json:"closed,omitzero"`
	// Status is open, owed (closed by the server, its refund not
	// claimed yet) or refunded.
	Status string `json:"status"`
}

func rowOf(server string, s channel.State) channelRow {
	r := channelRow{Server: server, Channel: s.Channel.String(), Deposit: s.Deposit, Spent: min(s.Accumulated, s.Deposit),
		Opened: s.Opened, LastUse: s.LastUse, Closed: s.ClosedAt, Status: "open"}
	r.Unspent = r.Deposit - r.Spent
	switch {
	case s.Closed && s.Refund == channel.RefundPaid:
		r.Status = "refunded"
	case s.Closed:
		r.Status = "owed"
	}
	return r
}

// identityChannels opens the channel store of the identity of --key (or
// the configured one), which must exist: a throwaway key has no channels.
func (a *app) identityChannels(ctx context.Context, key string) (identity, *durable.File, error) {
	id, err := a.resolveIdentity(key, existingKey)
	if err != nil {
		return id, nil, err
	}
	st, err := a.channelStore(ctx, id.pubkey())
	return id, st, err
}

// listChannels is cvm channels: every channel of the identity on record.
func (a *app) listChannels(ctx context.Context, key string) error {
	id, st, err := a.identityChannels(ctx, key)
	if err != nil {
		return err
	}
	defer st.Close()
	payer := (&cep8.PayOptions{Channel: &cep8.ChannelOptions{Store: st}}).Payer().(*cep8.Payer)
	byServer := payer.Channels(ctx)
	rows := []channelRow{}
	for server, states := range byServer {
		for _, s := range states {
			rows = append(rows, rowOf(nostrx.EncodeNpub(server), s))
		}
	}
	for url, states := range quotation.Channels(ctx, st) {
		for _, s := range states {
			rows = append(rows, rowOf(url, s))
		}
	}
	slices.SortFunc(rows, func(x, y channelRow) int { return y.LastUse.Compare(x.LastUse) })
	if a.jsonOut {
		return a.printJSON(map[string]any{"channels": rows})
	}
	if len(rows) == 0 {
		fmt.Fprintf(a.stdout, "no channels (identity %s); cvm call --channel SATS opens one\n", nostrx.EncodeNpub(id.pubkey()))
		return nil
	}
	w := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SERVER\tCHANNEL\tDEPOSIT\tSPENT\tUNSPENT\tLAST USE\tSTATUS")
	for _, r := range rows {
		status := r.Status
		if status == "owed" {
			status = "owed: closed by the server (cvm channels close " + r.Server[:12] + "…)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Server, shortID(r.Channel), sats(r.Deposit), sats(r.Spent), sats(r.Unspent), when(r.LastUse), status)
	}
	return w.Flush()
}

// sats writes msat as sats, with the millisats only when there are some.
func sats(msat uint64) string {
	if msat%1000 == 0 {
		return fmt.Sprint(msat / 1000)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%03d", msat/1000, msat%1000), "0")
}

func shortID(id string) string {
	if len(id) <= 14 {
		return id
	}
	return id[:10] + "…" + id[len(id)-4:]
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04Z")
}
