// Command cvm puts MCP servers on open networks and lets agents use them:
// ContextVM (MCP over Nostr) and MCPx rooms.
//
// Run `cvm help` for the commands. Exit status: 0 on success, 1 when the
// remote side reported a failure, 2 on a usage or local error; cvm call
// tells more apart for scripts (callexit.go).
//
// The command parses flags and wires the library's packages together; what
// a Go program embedding cvm would need lives in those packages (the
// gateway and its HTTP endpoint in gateway, the HTTP quotation buyer in
// payments/quotation, the paying proxy connection in proxy), and no
// function here is longer than 80 lines (funclen_test.go).
//
// The app type is what every command shares (the environment, --json,
// logging, identities, dialing servers, payments) and builds the
// commands; a command that does more than wire a library call runs as a
// type of its own that embeds the app and holds the command's flags:
// gatewayCmd, discoverCmd, callCmd, relayCmd, walletSimCmd, and the room
// commands' roomServeCmd, roomTokenCmd, roomBridgeCmd, roomChatCmd.
//
// The files, by command group:
//
//   - Shared conventions: main.go (the process), app.go (the state of one
//     invocation, exit statuses, --json, logging, the data directory),
//     usage.go (argument checks with usage and an example), identity.go
//     (key precedence), version.go.
//   - Clients (call, tools, resources, prompts): client.go (the client
//     flags, finding a server's relays), oneshot.go (dialing one server,
//     stateless or not), httpclient.go (servers over MCP streamable HTTP,
//     signed with DIDAuthV1, paying by quotation), call.go and args.go (a
//     tool call and its arguments), callschema.go (a call by common
//     schema), calloutput.go and extract.go (a call's output for scripts:
//     --raw, and --extract PATH, its grammar and what it selects),
//     callexit.go (a call's exit status, by what went wrong), list.go,
//     gen.go (cvm gen: typed client code by package clientgen, and
//     --check), market.go (cvm market: package market served on stdio or
//     --http, with the call command's trust and payment flags), contacts.go (what is known of a server), pay.go
//     (budget, wallets, confirmation, refusals), channels.go (prepaid
//     payment channels: --channel, their store, cvm channels and close),
//     usdrate.go (the usd rate
//     source's flags, shared with the gateway, and the outbound fetcher),
//     outboundtrust.go and outboundtrust_cvmtest.go (that fetcher's
//     options: the defaults, and in the test build only, tag cvmtest, the
//     loopback servers a test names).
//   - Discovery: discover.go, discoverserve.go (the catalog page),
//     schema.go and schemaprefix.go (common schemas), trust.go,
//     reputation.go (--wot, the history of calls, servers scored by
//     package reputation); discoversocial.go (the profiles, nip05 checks and notes discover
//     shows), catalogsocial.go (the catalog page's profiles, reviews and
//     the operator's reviews), nip05.go (servers named name@domain).
//   - Social (CEP-23, CEP-24): profile.go (the gateway's --profile-* and
//     publishing its kind 0), note.go (cvm note, and publishing one signed
//     event), review.go (cvm review), reviews.go (cvm reviews).
//   - Serving: gatewaycmd.go (cvm gateway's flags and checks), gatewayrun.go
//     (its wiring: wallet, state, server options, ready line),
//     gatewaychannels.go (its CEP-8 gate, and whether it offers payment
//     channels, their books in the replica group's bucket with --nats), gatewayhttp.go (its HTTP endpoint, gateway.ListenHTTP), gatewayzap.go
//     (--zap-address: the gate that collects zaps to a Lightning address),
//     gatewaycashu.go (--cashu-mint: the Redeemer of Cashu direct payments),
//     gatewayreplicas.go (--nats), unannounce.go, proxycmd.go, relay.go.
//   - Rooms (MCPx): room.go (the room group, serve, token), roombridge.go,
//     roomjoin.go (the flags bridge and chat join a topic with),
//     roomchat.go.
//   - Cashu: cashu.go (cvm cashu mint, balance, send and receive over
//     package payments/cashu/wallet, the mint's invoice paid within the
//     payment limits).
//   - The rest: keygen.go (keygen, whoami), configcmd.go, demo.go,
//     walletsim.go, walletsimaddr.go (wallet-sim's Lightning addresses,
//     --lnaddr), mintsim.go (mint-sim: the Cashu mint of payments/cashu/mint
//     over the NIP-47 wallet of --wallet-file).
package main
