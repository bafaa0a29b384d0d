package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cvmgo/cvm/mcpx"
	"github.com/cvmgo/cvm/mcpx/participant"
	"github.com/spf13/cobra"
)

const chatHelp = `commands:
  TEXT                      say TEXT to the room (//TEXT says /TEXT)
  /md TEXT                  say TEXT as markdown
  /who                      who is here
  /tools PEER               list PEER's tools
  /call PEER TOOL [{json}]  call PEER's TOOL with JSON arguments
  /history [N]              the last N envelopes you may see (default 20)
  /help, /quit`

// roomChatFlags are cvm room chat's flags.
type roomChatFlags struct {
	join  joinFlags
	drain time.Duration
}

// roomChatCmd is one run of cvm room chat: the invocation's app and the
// command's flags.
type roomChatCmd struct {
	*app
	cf roomChatFlags
}

func (a *app) roomChatCommand() *cobra.Command {
	var cf roomChatFlags
	cmd := &cobra.Command{
		Use:   "chat --topic T (--token T | --token-file F)",
		Short: "Join a room from the terminal: chat, presence, and peers' tools",
		Long: `Join a topic as a participant: see who comes and goes and what they say,
say things, and use the other participants' tools.

Each line read on stdin is said to the room, or is a command:
` + chatHelp + `

Markdown messages (/md, or a peer's) are shown as their text. Other
participants may call this participant's chat.say and presence.get tools
(seed 001 §8.2); what chat.say makes you say is shown with the caller's name.

It works in a terminal and when a program drives it through stdin and
stdout. With --json every line printed is one JSON object (the first one
says {"event":"ready",...}); otherwise lines are for people.

Lines are said one at a time, each once the gateway has published (echoed)
the one before, in order: input that comes faster than the gateway's rate limit
waits in a queue (the gateway's rate_limited answers say how long). End of
input or /quit leaves the room once the queue is empty, or once
--drain-timeout has passed; SIGINT leaves at once. Lines not sent by then
are counted: the command says how many and exits with status 1.`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return (&roomChatCmd{app: a, cf: cf}).run(cmd.Context()) },
	}
	cf.join.register(cmd.Flags())
	cmd.Flags().DurationVar(&cf.drain, "drain-timeout", defaultDrainTimeout,
		"at end of input or /quit, how long lines still queued may take to reach the room (0: none)")
	return cmd
}

// run joins the topic and chats until end of input, /quit or the end of
// ctx.
func (c *roomChatCmd) run(ctx context.Context) error {
	copts, err := c.cf.join.options()
	if err != nil {
		return err
	}
	if c.cf.drain < 0 {
		return errors.New("--drain-timeout must not be negative")
	}
	out := &chatOutput{w: c.stdout, json: c.jsonOut}
	copts.Logger = c.log
	copts.OnEvent = out.event
	pc, err := participant.Connect(ctx, copts)
	if err != nil {
		return joinError(err)
	}
	defer pc.Close()
	out.ready(pc, c.cf.join.topic)
	return chatLoop(ctx, pc, c.stdin, out, c.cf.drain)
}

// defaultDrainTimeout is how long the queue may take to empty at the end
// of input: at the gateway's default rate (50 lines/s) it is room for 500
// lines beyond the burst, while a gateway that takes nothing still lets
// the command end soon.
const defaultDrainTimeout = 10 * time.Second

// chatQueueMax bounds the lines read ahead of what the room has taken.
// Reading ahead is what lets the chat see the end of input, and start
// --drain-timeout, while lines are still queued; past the bound, reading
// waits, as the pipe's writer would.
const chatQueueMax = 1024

// errInterrupted cuts the queue short when the command is interrupted.
var errInterrupted = errors.New("interrupted")

// chatLoop reads commands until end of input, /quit or ctx ends, then
// waits at most drain for the queue to empty. Lines not sent are counted
// and make the error it returns.
func chatLoop(ctx context.Context, c *participant.Client, in io.Reader, out *chatOutput, drain time.Duration) error {
	lines := make(chan string, chatQueueMax)
	ended := make(chan error, 1)
	// Owned by chatLoop only until it returns: a read blocked on a
	// terminal cannot be interrupted, and the process exits anyway.
	go readChatInput(ctx, in, lines, ended)

	work, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var tally chatTally
	done := make(chan struct{})
	go func() {
		defer close(done)
		tally.run(work, c, lines, out)
	}()
	var readErr, why error // why: why the queue was cut short
	select {
	case readErr = <-ended:
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			why = fmt.Errorf("--drain-timeout %s passed first; the gateway takes lines at its rate limit, so give them more time with --drain-timeout", drain)
		case <-ctx.Done():
			why = errInterrupted
		}
	case <-ctx.Done():
		why = errInterrupted
	}
	stop(why)
	<-done
	tally.countQueued(lines)
	return errors.Join(readErr, tally.err(why))
}

// readChatInput sends the lines of in to lines until end of input or
// /quit (then it sends nil to ended and closes lines), a read error (sent
// to ended) or the end of ctx.
func readChatInput(ctx context.Context, in io.Reader, lines chan<- string, ended chan<- error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if cmd, err := parseChatLine(line); err == nil && cmd.name == "quit" {
			break
		}
		select {
		case lines <- line:
		case <-ctx.Done():
			return
		}
	}
	ended <- sc.Err()
	close(lines)
}

// chatTally runs the queued lines and counts those said and not.
type chatTally struct {
	notSent     int // refused, not sent in time, or still queued
	unconfirmed int // sent, but the gateway's acknowledgement did not come in time
}

// run runs the lines in order until lines closes or ctx ends.
func (t *chatTally) run(ctx context.Context, c *participant.Client, lines <-chan string, out *chatOutput) {
	for ctx.Err() == nil {
		var line string
		select {
		case <-ctx.Done():
			return
		case l, ok := <-lines:
			if !ok {
				return
			}
			line = l
		}
		cmd, err := parseChatLine(line)
		if err != nil {
			out.fail(line, err)
			continue
		}
		if cmd.name != "say" {
			runChatCommand(ctx, c, cmd, out)
			continue
		}
		if err := say(ctx, c, cmd); err != nil {
			if errors.Is(err, participant.ErrUnconfirmed) {
				t.unconfirmed++
			} else {
				t.notSent++
			}
			if ctx.Err() == nil { // else the count says it
				out.fail("say", err)
			}
		}
	}
}

// say says cmd's text once the gateway took every line before it.
func say(ctx context.Context, c *participant.Client, cmd chatCommand) error {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	_, err := c.SayConfirmed(ctx, cmd.text, cmd.format)
	return err
}

// countQueued counts as not sent the lines left in the queue.
func (t *chatTally) countQueued(lines <-chan string) {
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return
			}
			if strings.TrimSpace(line) != "" {
				t.notSent++
			}
		default:
			return
		}
	}
}

// err reports the lines not sent, if any; why is what cut the queue short,
// if anything did.
func (t *chatTally) err(why error) error {
	if t.notSent == 0 && t.unconfirmed == 0 {
		return nil
	}
	var parts []string
	if t.notSent > 0 {
		parts = append(parts, fmt.Sprintf("%d %s not sent", t.notSent, plural(t.notSent, "line was", "lines were")))
	}
	if t.unconfirmed > 0 {
		// Its echo did not come in time: the gateway may have published it.
		parts = append(parts, fmt.Sprintf("%d %s sent but not confirmed by the gateway", t.unconfirmed, plural(t.unconfirmed, "line was", "lines were")))
	}
	msg := strings.Join(parts, ", and ")
	if why != nil {
		return remote(fmt.Errorf("%s: %w", msg, why))
	}
	return remote(fmt.Errorf("%s (the gateway's answers are above)", msg))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// chatCommand is one parsed input line.
type chatCommand struct {
	name   string // say, who, tools, call, history, help, quit; "" for nothing
	text   string // say
	format string // say: plain or markdown
	peer   string // tools, call
	tool   string // call
	args   json.RawMessage
	n      int // history
}

// parseChatLine parses a line of chat input. Anything not starting with a
// slash is said as it is.
func parseChatLine(line string) (chatCommand, error) {
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return chatCommand{}, nil
	}
	if !strings.HasPrefix(line, "/") {
		return chatCommand{name: "say", text: line, format: participant.FormatPlain}, nil
	}
	if strings.HasPrefix(line, "//") {
		return chatCommand{name: "say", text: line[1:], format: participant.FormatPlain}, nil
	}
	fields := strings.Fields(line)
	name, rest := strings.TrimPrefix(fields[0], "/"), fields[1:]
	switch name {
	case "who", "help", "quit":
		if len(rest) != 0 {
			return chatCommand{}, fmt.Errorf("/%s takes no arguments", name)
		}
		return chatCommand{name: name}, nil
	case "md":
		// The text is the rest of the line, spaces and all: they can
		// matter in markdown.
		text := afterFields(line, 1)
		if text != "" {
			text = text[1:] // the one blank after /md
		}
		if strings.TrimSpace(text) == "" {
			return chatCommand{}, errors.New("usage: /md TEXT")
		}
		return chatCommand{name: "say", text: text, format: participant.FormatMarkdown}, nil
	case "tools":
		if len(rest) != 1 {
			return chatCommand{}, errors.New("usage: /tools PEER")
		}
		return chatCommand{name: name, peer: rest[0]}, nil
	case "history":
		n := 20
		if len(rest) > 1 {
			return chatCommand{}, errors.New("usage: /history [N]")
		}
		if len(rest) == 1 {
			v, err := strconv.Atoi(rest[0])
			if err != nil || v < 1 || v > 1000 {
				return chatCommand{}, errors.New("usage: /history [N], N from 1 to 1000")
			}
			n = v
		}
		return chatCommand{name: name, n: n}, nil
	case "call":
		if len(rest) < 2 {
			return chatCommand{}, errors.New("usage: /call PEER TOOL [{json arguments}]")
		}
		c := chatCommand{name: name, peer: rest[0], tool: rest[1], args: json.RawMessage("{}")}
		// The arguments are the rest of the line, spaces and all.
		if raw := strings.TrimSpace(afterFields(line, 3)); raw != "" {
			var obj map[string]any
			if err := json.Unmarshal([]byte(raw), &obj); err != nil {
				return chatCommand{}, fmt.Errorf("/call arguments must be a JSON object: %v", err)
			}
			c.args = json.RawMessage(raw)
		}
		return c, nil
	}
	return chatCommand{}, fmt.Errorf("unknown command /%s (try /help)", name)
}

// afterFields returns what follows the first n whitespace-separated fields
// of line.
func afterFields(line string, n int) string {
	rest := line
	for range n {
		rest = strings.TrimLeft(rest, " \t")
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			return ""
		}
		rest = rest[i:]
	}
	return rest
}

// commandTimeout bounds a line said or a /tools or /call: the lines after
// it wait for it.
const commandTimeout = 2 * time.Minute

func runChatCommand(ctx context.Context, c *participant.Client, cmd chatCommand, out *chatOutput) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	switch cmd.name {
	case "help":
		out.text(chatHelp)
	case "who":
		out.who(c.Self(), c.Participants())
	case "tools":
		res, err := c.Request(ctx, cmd.peer, "tools/list", map[string]any{})
		if err != nil {
			out.fail("/tools "+cmd.peer, err)
			return
		}
		out.tools(cmd.peer, res)
	case "call":
		res, err := c.Request(ctx, cmd.peer, "tools/call", map[string]any{"name": cmd.tool, "arguments": cmd.args})
		if err != nil {
			out.fail("/call "+cmd.peer+" "+cmd.tool, err)
			return
		}
		out.callResult(cmd.peer, cmd.tool, res)
	case "history":
		envs, _, err := c.History(ctx, participant.HistoryQuery{Limit: cmd.n})
		if err != nil {
			out.fail("/history", err)
			return
		}
		out.history(envs)
	}
}

// chatOutput prints events and results, one line (or one JSON object) at
// a time, from the client's goroutine and the input loop alike.
type chatOutput struct {
	mu        sync.Mutex
	w         io.Writer
	json      bool
	connected int // welcomes seen: the first is the ready line, later ones reconnects
}

func (o *chatOutput) line(human string, obj map[string]any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.json {
		b, err := plainJSON(obj)
		if err == nil {
			fmt.Fprintf(o.w, "%s\n", b)
		}
		return
	}
	fmt.Fprintln(o.w, termText(human, ""))
}

func (o *chatOutput) text(s string) { o.line(s, map[string]any{"event": "help", "text": s}) }

func ids(ps []mcpx.Participant) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

func (o *chatOutput) ready(c *participant.Client, topic string) {
	self, others := c.Self(), c.Participants()
	here := "nobody else is here"
	if len(others) > 0 {
		here = "here: " + strings.Join(ids(others), ", ")
	}
	o.line(fmt.Sprintf("* joined %s as %s; %s (/help for commands)", topic, self.ID, here),
		map[string]any{"event": "ready", "topic": topic, "participant": self, "participants": others})
}

func (o *chatOutput) who(self mcpx.Participant, others []mcpx.Participant) {
	var b strings.Builder
	fmt.Fprintf(&b, "* %s (you)", self.ID)
	for _, p := range others {
		fmt.Fprintf(&b, "\n* %s (%s, %s)", p.ID, termField(p.Name), termField(string(p.Kind)))
	}
	o.line(b.String(), map[string]any{"event": "who", "participant": self, "participants": others})
}

func (o *chatOutput) fail(what string, err error) {
	o.line(fmt.Sprintf("! %s: %s", termField(what), termField(err.Error())), map[string]any{"event": "error", "command": what, "error": err.Error()})
}

// event prints what the client saw. It runs on the client's receive
// goroutine, so it only formats and writes.
func (o *chatOutput) event(e participant.Event) {
	switch e.Type {
	case participant.EventChat:
		m := e.Chat
		if m.Mine && m.SaidFor == "" && !o.json {
			return // a person sees what they typed
		}
		who := m.From
		if m.SaidFor != "" {
			who += " (chat.say by " + m.SaidFor + ")" // someone spoke in your name
		}
		obj := map[string]any{"event": "chat", "from": m.From, "text": m.Text, "format": m.Format,
			"id": m.ID, "seq": m.Seq, "mine": m.Mine, "replayed": e.Replayed}
		if m.SaidFor != "" {
			obj["said_for"] = m.SaidFor
		}
		// Markdown is shown as its text: a terminal has no better
		// rendering than the source, which markdown is meant to be
		// readable as.
		o.line(fmt.Sprintf("<%s> %s", who, termText(m.Text, chatIndent)), obj)
	case participant.EventNotification:
		if e.Method == methodToolsAvailable {
			o.toolsAvailable(e)
		}
	case participant.EventJoin:
		o.line(fmt.Sprintf("* %s joined", e.Participant.ID), map[string]any{"event": "join", "participant": e.Participant})
	case participant.EventLeave:
		why := ""
		if e.Reason != "" {
			why = " (" + string(e.Reason) + ")"
		}
		o.line(fmt.Sprintf("* %s left%s", e.Participant.ID, why), map[string]any{"event": "leave", "participant": e.Participant, "reason": e.Reason})
	case participant.EventDisconnected:
		o.line(fmt.Sprintf("* disconnected (%v); reconnecting", e.Err), map[string]any{"event": "disconnected", "error": fmt.Sprint(e.Err)})
	case participant.EventConnected:
		o.mu.Lock()
		o.connected++
		again := o.connected > 1
		o.mu.Unlock()
		if again {
			o.line("* reconnected", map[string]any{"event": "reconnected", "participants": e.Participants})
		}
	}
}

// methodToolsAvailable is how a participant (a cvm bridge with
// --announce-tools, the reference bridge) advertises its tools.
const methodToolsAvailable = "notifications/tools/available"

func (o *chatOutput) toolsAvailable(e participant.Event) {
	var p struct {
		Params struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"params"`
	}
	if json.Unmarshal(e.Envelope.Payload, &p) != nil {
		return
	}
	names, shown := []string{}, []string{}
	for _, t := range p.Params.Tools {
		names = append(names, t.Name)
		shown = append(shown, termField(t.Name))
	}
	o.line(fmt.Sprintf("* %s offers %d tools: %s", e.Envelope.From, len(names), strings.Join(shown, ", ")),
		map[string]any{"event": "tools_available", "from": e.Envelope.From, "tools": names, "replayed": e.Replayed})
}

func (o *chatOutput) tools(peer string, raw json.RawMessage) {
	var res struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	json.Unmarshal(raw, &res)
	var b strings.Builder
	fmt.Fprintf(&b, "* %s has %d tools:", peer, len(res.Tools))
	for _, t := range res.Tools {
		fmt.Fprintf(&b, "\n  %s", termField(t.Name))
		if d, _, _ := strings.Cut(t.Description, "\n"); d != "" {
			fmt.Fprintf(&b, ": %s", d)
		}
	}
	o.line(b.String(), map[string]any{"event": "tools", "peer": peer, "result": raw})
}

func (o *chatOutput) callResult(peer, tool string, raw json.RawMessage) {
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	json.Unmarshal(raw, &res)
	var parts []string
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		} else {
			parts = append(parts, "["+c.Type+"]")
		}
	}
	mark := "*"
	if res.IsError {
		mark = "!"
	}
	o.line(fmt.Sprintf("%s %s %s: %s", mark, peer, tool, termText(strings.Join(parts, "\n"), chatIndent)),
		map[string]any{"event": "result", "peer": peer, "tool": tool, "result": raw})
}

func (o *chatOutput) history(envs []*mcpx.Envelope) {
	var b strings.Builder
	fmt.Fprintf(&b, "* the last %d envelopes:", len(envs))
	list := []*mcpx.Envelope{}
	for i := len(envs) - 1; i >= 0; i-- { // oldest first
		e := envs[i]
		list = append(list, e)
		var p struct {
			Method string `json:"method"`
			Params struct {
				Text string `json:"text"`
			} `json:"params"`
		}
		json.Unmarshal(e.Payload, &p)
		switch {
		case p.Method == "notifications/chat/message":
			fmt.Fprintf(&b, "\n  [%d] <%s> %s", e.Seq, e.From, termText(p.Params.Text, "    "))
		case p.Method != "":
			fmt.Fprintf(&b, "\n  [%d] %s -> %s: %s", e.Seq, e.From, strings.Join(e.To, ","), p.Method)
		default:
			fmt.Fprintf(&b, "\n  [%d] %s -> %s: (response)", e.Seq, e.From, strings.Join(e.To, ","))
		}
	}
	o.line(b.String(), map[string]any{"event": "history", "envelopes": list})
}

// chatIndent starts each continuation line of a peer's text.
const chatIndent = "  "

// termText makes untrusted text safe to print on a terminal. Control
// characters (escape sequences can move the cursor, rewrite lines already
// shown or retitle the window; a carriage return overwrites the line),
// bidirectional overrides and invalid UTF-8 are shown escaped, as \x1b or
// \u202e. Each line after the first starts with indent, so that a peer's
// message cannot forge a line of the chat's own ("* dave joined") unless
// indent is "".
func termText(s, indent string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\n':
			b.WriteByte('\n')
			b.WriteString(indent)
		case r == '\t':
			b.WriteByte('\t')
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// termField is termText for what must stay on one line: a newline is
// shown as \n too.
func termField(s string) string {
	return termText(strings.NewReplacer("\r\n", `\n`, "\n", `\n`).Replace(s), "")
}
