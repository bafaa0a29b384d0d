package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cvmgo/cvm/internal/secretenv"
	"github.com/cvmgo/cvm/mcpx/bridge"
	"github.com/spf13/cobra"
)

// roomBridgeHelp is the long help of roomBridge.
var roomBridgeHelp = `Run a stdio MCP server and make it a participant of a topic: peers initialize
with it, list and call its tools, read its resources, get its prompts and
completions, and receive its notifications, as if they had started it
themselves. The server's own initialize result is passed through; JSON-RPC
ids and progress tokens are remapped per peer; error codes are kept; the
server's sampling and elicitation requests go to the peer whose call caused
them. If the server exits it is restarted with backoff, and the calls it
took with it fail rather than hang. A peer's shutdown is answered by the
bridge: the server serves every peer and is not stopped by one. With
--announce-tools the bridge broadcasts the server's tools (name, title,
description) each time it joins, as notifications/tools/available.

The server gets cvm's environment without the variables cvm reads secrets
from (` + "$" + strings.Join(secretenv.Names(), ", $") + `); --pass-env NAME (repeatable) hands
one over anyway. It runs in a process group of its own, stopped as a whole
(SIGTERM, then SIGKILL 2 s later) when it exits (a restart follows) and
when the bridge stops: nothing it started outlives it.

When the bridge has joined, one JSON line is printed on stdout:
  {"ready":true,"participant":"alpha","topic":"room:x","server":{...},...}
Logs and the server's stderr go to stderr. SIGINT or SIGTERM leaves the
topic and stops the server.`

// roomBridgeFlags are cvm room bridge's flags.
type roomBridgeFlags struct {
	join          joinFlags
	restartMax    time.Duration
	announceTools bool
	passEnv       []string
}

// roomBridgeCmd is one run of cvm room bridge: the invocation's app and
// the command's flags.
type roomBridgeCmd struct {
	*app
	bf roomBridgeFlags
}

func (a *app) roomBridgeCommand() *cobra.Command {
	var bf roomBridgeFlags
	cmd := &cobra.Command{
		Use:     "bridge --topic T (--token T | --token-file F) -- COMMAND [ARG...]",
		Short:   "Put a stdio MCP server into a room as a participant",
		Long:    roomBridgeHelp,
		Example: `  cvm room bridge --gateway ws://127.0.0.1:8090 --topic room:demo --token-file alpha.token -- npx -y @modelcontextprotocol/server-everything`,
		Args:    positional(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return (&roomBridgeCmd{app: a, bf: bf}).run(cmd.Context(), args)
		},
	}
	f := cmd.Flags()
	bf.join.register(f)
	f.BoolVar(&bf.announceTools, "announce-tools", false, "broadcast the server's tools to the topic on every join (notifications/tools/available)")
	f.StringArrayVar(&bf.passEnv, "pass-env", nil, "give the server this secret variable of cvm's environment anyway: "+strings.Join(secretenv.Names(), " or ")+" (repeatable)")
	f.DurationVar(&bf.restartMax, "restart-max", 30*time.Second, "longest wait between restarts of a server that keeps exiting")
	return cmd
}

// run starts the server COMMAND (args), joins the topic with it and
// serves until ctx ends.
func (b *roomBridgeCmd) run(ctx context.Context, args []string) error {
	copts, err := b.bf.join.options()
	if err != nil {
		return err
	}
	copts.Logger = b.log
	if _, err := exec.LookPath(args[0]); err != nil {
		return fmt.Errorf("command %s: %w", args[0], err)
	}
	if err := secretenv.CheckPass(b.bf.passEnv); err != nil {
		return err
	}
	env := secretenv.Strip(os.Environ(), b.bf.passEnv)
	br, err := bridge.Start(ctx, bridge.Options{
		Participant: copts,
		Command: func() *exec.Cmd {
			c := exec.Command(args[0], args[1:]...)
			c.Env = env
			return c
		},
		Stderr:        b.stderr,
		RestartMax:    b.bf.restartMax,
		AnnounceTools: b.bf.announceTools,
		Logger:        b.log,
	})
	if err != nil {
		return joinError(err)
	}
	defer br.Close()
	info := br.ServerInfo()
	ready := map[string]any{
		"ready":            true,
		"participant":      br.Client().Self().ID,
		"topic":            b.bf.join.topic,
		"server":           info.ServerInfo,
		"protocol_version": info.ProtocolVersion,
	}
	if err := b.printJSON(ready); err != nil {
		return err
	}
	b.log.Info("bridge joined", "topic", b.bf.join.topic, "participant", br.Client().Self().ID, "command", args[0])
	<-ctx.Done()
	b.log.Info("shutting down")
	return nil
}
