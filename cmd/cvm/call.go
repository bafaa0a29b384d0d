package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cvmgo/cvm/commonschema"
	"github.com/cvmgo/cvm/contextvm"
	"github.com/cvmgo/cvm/payments/quotation"
	"github.com/cvmgo/cvm/reputation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// callHelp is the long help of call.
const callHelp = `Call TOOL on the ContextVM server SERVER (a public key as hex, npub or
nprofile, or an alias from [servers] in config.toml) and print its result.

Arguments are one JSON object, or key=value pairs typed by the tool's input
schema: a=2 is the number 2 where the schema wants a number and the string
"2" where it wants a string; arrays and objects are given as JSON. They are
checked against the schema before the call is sent.

The call is sent without an MCP session (CEP-35 stateless, one round trip)
when the server is known to take it: it announces itself, or it answered
before; --stateful opens a session first, --stateless forces it. Arguments
are typed from the server's tools announcement or the tools it listed last
time, remembered in the cache directory; tools/list is asked only without
them. Whether the server reads gift wraps is remembered too, for
--encryption optional to send the right form first; a fact out of date is
found out, said on stderr and corrected (see docs/protocol-compatibility.md).
--stream writes the chunks of the tool's open stream (CEP-41) to stdout as
they arrive.

The result's text goes to stdout; --json prints the whole CallToolResult.
Progress goes to stderr.

%s

With --schema HASH and no SERVER, the tool is called on a server chosen
among those that announce a verified implementation of that common schema
(see cvm discover; the start of a hash will do when only one announced
hash starts with it). An announcement is no reason to trust a server with
your arguments: by default only servers you trust are called (--trust NPUB,
repeatable, or the [trust] table of config.toml); --trust-policy
trusted-first calls them first and others after, any ranks all alike,
reputation calls the others whose reputation is %g or more (see cvm
discover --sort reputation; --wot NPUB roots the web of trust). Then: the
better reputation, by bands of %g points; prices in sats (or free)
before other units, which are never compared as numbers; the cheapest;
the fastest to answer before; servers that failed in the last 10 minutes
last. Before the arguments are sent, the
chosen server's live tools/list must still serve the schema; if not, or on
an error or a timeout, the next one is tried. Invalid arguments and the
tool's own errors are answers, not reasons to try elsewhere. The outcome
of every call (by schema or not) is remembered in history.json in the
cache directory: the last 50 calls to each server. The chosen server is
named on stderr; --json prints {"result", "provider", "attempts"}, and
--raw and --extract the result alone. A payment not made (see below) is
not the server's failure: it is not remembered as one, and only servers
that announce a lower price, in the same unit, are tried after it.

A priced tool is paid for only within --max-sats (or payments.max-sats in
config.toml): a priced call without a cap exits 5. On a terminal cvm asks
before paying, unless --yes; without one it pays only with --yes. Daily
limits (payments.max-sats-per-day, payments.max-sats-per-server-per-day)
are kept in the data directory, shared by every cvm on the machine, and
payments.allow names the servers allowed to charge. The wallet URI comes
from --wallet-file FILE (mode 0600) or $CVM_WALLET, never from a flag.
Each payment is reported on stderr, and with --json in the result's
_meta["cvm/payments"].

Many calls to one server: --channel SATS (payments.channel-deposit) pays
SATS once into a prepaid payment channel with a server that offers them,
and the priced calls from it, with no invoice; see cvm channels --help.

%s`

// callCmd is one run of cvm call: the invocation's app and the command's
// flags, the client's (the payments it may make among them) and the
// output's.
type callCmd struct {
	*app
	cf     clientFlags
	out    callOutput
	schema string
	stream bool
	tf     trustFlags
	rf     reputationFlags
	pf     payFlags
}

func (a *app) callCommand() *cobra.Command {
	c := &callCmd{app: a}
	cmd := &cobra.Command{
		Use:   "call SERVER TOOL [JSON | key=value…] | call --schema HASH TOOL [JSON | key=value…]",
		Short: "Call a tool of a ContextVM server",
		Long:  fmt.Sprintf(callHelp, callOutputHelp, reputation.AdmitThreshold, reputation.BandWidth, exitCodesHelp),
		Example: `  cvm call npub1… add a=2 b=3
  cvm call npub1… add a=2 b=3 --extract structuredContent.sum
  cvm call weather forecast '{"city":"Lyon","days":3}'
  cvm call --schema 7c61a439f00669bd… --trust npub1… translate text=hello to=fr`,
		Args: func(cmd *cobra.Command, args []string) error {
			if c.schema != "" {
				return positional(1, -1)(cmd, args)
			}
			return positional(2, -1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.out.check(cmd, c.stream); err != nil {
				return err
			}
			return classifyCall(cmd.Context(), c.run(cmd.Context(), args))
		},
	}
	a.addClientFlags(cmd, &c.cf, 30*time.Second)
	addModeFlags(cmd, &c.cf, true)
	cmd.Flags().BoolVar(&c.stream, "stream", false, "read the tool's open stream (CEP-41) and write its chunks to stdout as they arrive")
	cmd.Flags().StringVar(&c.schema, "schema", "", "call the tool of this common schema hash (or a unique start of it) on the best server that announces it")
	addTrustFlags(cmd, &c.tf)
	addReputationFlags(cmd, &c.rf)
	a.addPayFlags(cmd, &c.pf, true)
	addChannelFlag(cmd, &c.pf)
	addOutputFlags(cmd, &c.out)
	return cmd
}

// run calls the tool: by schema, or on the server args name.
func (c *callCmd) run(ctx context.Context, args []string) error {
	schema, pf := c.schema, c.pf
	first := 2 // SERVER TOOL
	if schema != "" {
		first = 1 // TOOL
	}
	// Checked before anything is sent: their form needs no server.
	toolArgs, err := parseArguments(args[first:])
	if err != nil {
		return err
	}
	var prefix string
	var whole bool
	if schema != "" {
		if prefix, whole, err = schemaArg(schema); err != nil {
			return err
		}
	}
	pay, paid, err := c.payOptions(pf, c.askOnTerminal(pf.yes))
	if err != nil {
		return err
	}
	defer paid.Close()
	closeChannels, err := c.channelOptions(ctx, pf, c.cf, pay, paid)
	if err != nil {
		return err
	}
	defer closeChannels()
	c.cf.pay = pay
	if schema != "" {
		return c.callSchema(ctx, c.tf, c.rf, prefix, whole, args[0], toolArgs)
	}
	return c.call(ctx, args[0], args[1], toolArgs, c.stream, paid)
}

// call calls tool name on server with args, typed by the tool's schema.
func (c *callCmd) call(ctx context.Context, server, name string, args callArguments, stream bool, paid *payLog) error {
	c.sessionToOpenChannel(ctx, &c.cf, server)
	cs, err := c.dial(ctx, c.cf, server, dialOptions{client: &mcp.ClientOptions{ProgressNotificationHandler: c.printProgress}, stream: stream})
	if err != nil {
		return err
	}
	defer cs.Close()
	if stream {
		if sup := cs.transport.ServerSupport(); (sup.Known && !sup.OpenStreams) || (!sup.Known && cs.ann != nil && !cs.ann.OpenStreams) {
			return remote(fmt.Errorf("%s does not offer open streams (CEP-41: it did not say support_open_stream); call it without --stream", server))
		}
	}
	tool, tools, err := cs.tool(ctx, name)
	if err != nil {
		cs.answered(err)
		return remoteFailure(ctx, "tools/list", server, cs.relays, err)
	}
	if tool == nil {
		return remote(fmt.Errorf("the server has no tool %q; it has: %s (see: cvm tools %s)", name, toolNames(tools), server))
	}
	arguments, err := toolArguments(tool.InputSchema, server, name, args)
	if err != nil {
		return err
	}
	params := &mcp.CallToolParams{Name: name, Arguments: arguments}
	if cs.httpURL != "" {
		cs.buyer.Learn(tools)
	}
	if cs.httpURL != "" && quotation.Priced(tool) && !cs.buyer.ByChannel() {
		if err := cs.payOverHTTP(ctx, params); err != nil {
			return withExit(exitPayment, err)
		}
	}
	token := fmt.Sprintf("cvm-%d", time.Now().UnixNano())
	params.SetProgressToken(token)
	var chunks *chunkWriter
	if stream {
		reader, err := cs.transport.OpenStream(token)
		if err != nil {
			return err
		}
		chunks = c.writeChunks(ctx, reader)
	}
	start := time.Now()
	res, err := cs.CallTool(ctx, params)
	if cs.httpURL != "" && quotation.IsRequired(err) && params.Meta[quotation.MetaQuotation] == nil {
		// Priced, though tools/list did not say so: pay, call again.
		if perr := cs.payOverHTTP(ctx, params); perr != nil {
			return withExit(exitPayment, perr)
		}
		res, err = cs.CallTool(ctx, params)
	}
	cs.answered(err)
	if c.cf.pay != nil && c.cf.pay.Channel != nil && cs.httpURL == "" {
		c.afterChannelCall(ctx, cs.opts, cs.transport.ServerSupport(), paid.payments())
	}
	if derr, ok := declinedError(err, c.cf.pay); ok {
		return withExit(exitPayment, derr) // the user's choice, not the server's doing
	}
	c.recordCall(cs, time.Since(start), err)
	if chunks != nil {
		// The result follows the stream's close: what is left is queued.
		if serr := chunks.finish(); serr != nil && err == nil {
			return remote(fmt.Errorf("tools/call %s: the stream ended: %w", name, serr))
		}
		if err == nil && !chunks.started() {
			c.log.Warn("the tool answered without opening a stream", "tool", name)
		}
	}
	if err != nil {
		return remoteFailure(ctx, "tools/call "+name, server, cs.relays, err)
	}
	return c.printResult(res, name, paid, chunks)
}

// toolArguments types the command line's arguments by the tool's input
// schema and checks them against it.
func toolArguments(inputSchema any, server, name string, args callArguments) (map[string]any, error) {
	arguments, err := args.typed(inputSchema)
	if err != nil {
		return nil, fmt.Errorf("%w (see: cvm tools %s --json)", err, server)
	}
	if err := commonschema.ValidateArguments(arguments, inputSchema); err != nil {
		return nil, fmt.Errorf("arguments for %s do not fit its input schema: %w (see: cvm tools %s --json)", name, err, server)
	}
	return arguments, nil
}

// printResult prints a tool's result (with --json, and the payments
// made for it), unless a stream printed its content already; a result
// that is an error is a remote failure.
func (c *callCmd) printResult(res *mcp.CallToolResult, name string, paid *payLog, chunks *chunkWriter) error {
	if c.out.scripted() {
		return c.printScripted(res, name)
	}
	if ps := paid.payments(); len(ps) > 0 && c.jsonOut {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta["cvm/payments"] = ps
	}
	if c.jsonOut {
		if err := c.printJSON(res); err != nil {
			return err
		}
	}
	if res.IsError {
		return toolError(name, res)
	}
	if !c.jsonOut && (chunks == nil || !chunks.started()) {
		printContent(c.stdout, res)
	}
	return nil
}

// chunkWriter copies an open stream's chunks to stdout as they arrive, on
// a goroutine it owns.
type chunkWriter struct {
	reader *contextvm.StreamReader
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	n      atomic.Int64
}

func (c *callCmd) writeChunks(ctx context.Context, r *contextvm.StreamReader) *chunkWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &chunkWriter{reader: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			data, err := r.Next(ctx)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
					w.err = err
				}
				return
			}
			w.n.Add(1)
			io.WriteString(c.stdout, data)
		}
	}()
	return w
}

// finish writes what the stream has delivered and stops reading: the
// stream closed before the result was sent, so nothing more is coming.
func (w *chunkWriter) finish() error {
	w.cancel()
	<-w.done
	return w.err
}

func (w *chunkWriter) started() bool { return w.n.Load() > 0 }

// printProgress reports progress notifications on stderr.
func (c *callCmd) printProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	fmt.Fprintln(c.stderr, progressLine(req.Params))
}

// progressLine says what a progress notification says. A message with no
// progress counted yet (the client transport's own "payment of 10 sats
// required …") is shown alone: "progress 0" would only be noise.
func progressLine(p *mcp.ProgressNotificationParams) string {
	line := fmt.Sprintf("progress %g", p.Progress)
	switch {
	case p.Total > 0:
		line = fmt.Sprintf("progress %g/%g", p.Progress, p.Total)
	case p.Progress == 0 && p.Message != "":
		return p.Message
	}
	if p.Message != "" {
		line += ": " + p.Message
	}
	return line
}

func toolNames(tools []*mcp.Tool) string {
	if len(tools) == 0 {
		return "no tools"
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// printContent prints a tool result for people: text as it is, other
// content as a short description, and the structured result when there is
// nothing else.
func printContent(w io.Writer, res *mcp.CallToolResult) {
	if len(res.Content) == 0 && res.StructuredContent != nil {
		b, _ := plainJSON(res.StructuredContent)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	for _, c := range res.Content {
		fmt.Fprintln(w, describeContent(c))
	}
}

func describeContent(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data))
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource link %s]", c.URI)
	case *mcp.EmbeddedResource:
		if c.Resource != nil && c.Resource.Text != "" {
			return c.Resource.Text
		}
		if c.Resource != nil {
			return fmt.Sprintf("[resource %s]", c.Resource.URI)
		}
	}
	b, _ := plainJSON(c)
	return string(b)
}

func contentText(content []mcp.Content) string {
	parts := make([]string, 0, len(content))
	for _, c := range content {
		parts = append(parts, describeContent(c))
	}
	return strings.Join(parts, " ")
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
