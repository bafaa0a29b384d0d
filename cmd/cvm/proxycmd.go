package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/internal/config"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/cvmgo/cvm/proxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// proxyHelp is the long help of proxy.
const proxyHelp = `Be a local stdio MCP server that forwards everything to the ContextVM server
SERVER (hex, npub, nprofile or a [servers] alias), so that any MCP host can
use it. In an MCP host's configuration:

  {"mcpServers": {"weather": {"command": "cvm", "args": ["proxy", "npub1…"]}}}

Nothing but MCP is written to stdout; logs go to stderr, or to --log-file.
The proxy ends when the host closes its input, or on SIGINT or SIGTERM.

A priced tool is paid for only within --max-sats (payments.max-sats in
config.toml, how a proxy started by a host gets one), from the wallet of
--wallet-file or $CVM_WALLET. A host that declares the elicitation
capability is asked before each payment (amount, unit, server, tool:
accept pays, decline does not); a host that does not is not asked, and the
proxy pays within the cap and the daily limits.

SERVER may also be an http(s):// MCP endpoint (streamable HTTP): requests
are signed with DIDAuthV1 as the identity's did:nostr (or --did-key FILE),
and priced tools are paid through NIP-10 quotations under the same limits.`

func (a *app) proxyCommand() *cobra.Command {
	var cf clientFlags
	var logFile string
	var pf payFlags
	cmd := &cobra.Command{
		Use:   "proxy SERVER",
		Short: "Serve a remote ContextVM (or MCP over HTTP) server to a local MCP host over stdio",
		Long:  proxyHelp,
		Example: `  cvm proxy npub1…
  cvm proxy https://mcp.example.com/mcp --max-sats 10`,
		Args: positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log := a.log
			if logFile != "" {
				f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
				if err != nil {
					return fmt.Errorf("--log-file: %w", err)
				}
				defer f.Close()
				if log, err = newLogger(f, a.logLevel, a.logFormat); err != nil {
					return err
				}
				a.log = log // where the relays used are explained, too
			}
			// The host is asked through elicitation if it takes it;
			// otherwise payments are made within the cap only.
			host := proxy.NewHost()
			pay, paid, err := a.payOptions(pf, host.Confirm)
			if err != nil {
				return err
			}
			defer paid.Close()
			cf.pay = pay
			ctx := cmd.Context()
			if isHTTPServer(args[0]) {
				return a.proxyHTTP(ctx, cf, args[0], host)
			}
			tg, err := a.locate(ctx, cf, args[0])
			if err != nil {
				return err
			}
			opts, err := a.clientOptions(cf, tg)
			if err != nil {
				return err
			}
			opts.Logger = log
			t, err := contextvm.NewClientTransport(opts)
			if err != nil {
				return err
			}
			// Subscribed before the host's first message is read, so
			// that no answer can come before anyone listens for it.
			remote, err := relayStage{t, opts.Relays, relayWait}.Connect(ctx)
			if err != nil {
				return err
			}
			local, err := (&mcp.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}}).Connect(ctx)
			if err != nil {
				remote.Close()
				return err
			}
			log.Info("proxy ready", "server", opts.Server, "relays", opts.Relays)
			if err := proxy.PipeHost(ctx, local, remote, log, host); err != nil {
				return err
			}
			log.Info("proxy stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&logFile, "log-file", "", "write logs to this file instead of stderr")
	config.Bind(cmd.Flags(), "log-file", "proxy.log-file")
	a.addClientFlags(cmd, &cf, 60*time.Second)
	addModeFlags(cmd, &cf, false)
	a.addPayFlags(cmd, &pf, false)
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// proxyHTTP serves an MCP server over streamable HTTP to the host: signed
// requests, priced tools paid by quotation.
func (a *app) proxyHTTP(ctx context.Context, cf clientFlags, server string, host *proxy.Host) error {
	hc, signer, err := a.httpClient(cf)
	if err != nil {
		return err
	}
	buyer := &quotation.Buyer{URL: server, Client: hc, Pay: cf.pay, Logger: a.log, Signer: signer}
	session := &http.Client{Transport: buyer.Transport(hc.Transport)}
	conn, err := (&mcp.StreamableClientTransport{Endpoint: server, HTTPClient: session}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", server, err)
	}
	remote := proxy.NewPayingConn(conn, buyer)
	local, err := (&mcp.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}}).Connect(ctx)
	if err != nil {
		remote.Close()
		return err
	}
	a.log.Info("proxy ready", "server", server, "did", signer.DID())
	if err := proxy.PipeHost(ctx, local, remote, a.log, host); err != nil {
		return err
	}
	a.log.Info("proxy stopped")
	return nil
}
