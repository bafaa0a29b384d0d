package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cvmgo/cvm/clientgen"
	"github.com/cvmgo/cvm/discovery"
	"github.com/cvmgo/cvm/nostrx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

const genHelp = `Write typed client code for the tools of SERVER (a public key as hex,
npub or nprofile, an alias from [servers] in config.toml, a NIP-05
name@domain, or the http(s):// URL of an MCP streamable HTTP endpoint),
or with --schema HASH for the tool of a common schema (CEP-15) as the
servers that announce a verified implementation of it define it.

--lang go writes a Go package of one file: a type for each tool's
arguments and structured result, from its JSON Schemas, and a Client with
one method per tool, which connects over Nostr with the cvm library
(Connect) or over MCP streamable HTTP (ConnectHTTP). --lang ts writes a
TypeScript module: interfaces for the schemas and a class over the
official MCP SDK's Client, connected over Nostr by @contextvm/sdk. What a
type cannot say (oneOf, anyOf) is typed loosely, with a comment.

The code records each tool's schema hash. --check FILE reads them back
and compares them with SERVER's tools now: it names the tools whose
schemas changed, the tools added and those removed, and exits 1 when
there are any.

The code goes to stdout, or to --out FILE, or into --out DIR as
PACKAGE.go or PACKAGE.ts.`

// genFlags are cvm gen's own flags.
type genFlags struct {
	lang, pkg, out, schema, check string
}

func (a *app) genCommand() *cobra.Command {
	var cf clientFlags
	var gf genFlags
	cmd := &cobra.Command{
		Use:   "gen --lang go|ts [--package NAME] [--out FILE|DIR] SERVER | gen --schema HASH … | gen --check FILE SERVER",
		Short: "Generate a typed Go or TypeScript client of a server's tools",
		Long:  genHelp,
		Example: `  cvm gen --lang go --package weather --out weather/ npub1…
  cvm gen --lang ts --out weather.ts weather@example.com
  cvm gen --check weather/weather.go npub1…`,
		Args: func(cmd *cobra.Command, args []string) error {
			if gf.schema != "" {
				return positional(0, 0)(cmd, args)
			}
			return positional(1, 1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if gf.lang != "go" && gf.lang != "ts" {
				return usageError(cmd, fmt.Sprintf("--lang %q: want go or ts", gf.lang))
			}
			if gf.check != "" && gf.schema != "" {
				return usageError(cmd, "--check compares a file with a server's tools: give SERVER, not --schema")
			}
			ctx := cmd.Context()
			var target string
			if len(args) > 0 {
				target = args[0]
			}
			if gf.check != "" {
				return a.genCheck(ctx, cf, gf.check, target)
			}
			src, tools, err := a.genTools(ctx, cf, gf.schema, target)
			if err != nil {
				return err
			}
			return a.genWrite(gf, src, tools)
		},
	}
	f := cmd.Flags()
	f.StringVar(&gf.lang, "lang", "go", "the language: go or ts")
	f.StringVar(&gf.pkg, "package", "", "the Go package name, or the TypeScript class's (default: from the server's name)")
	f.StringVar(&gf.out, "out", "", "write to this file, or into this directory (default: stdout)")
	f.StringVar(&gf.schema, "schema", "", "the tool of this common schema hash (or a unique start of it) rather than a server's tools")
	f.StringVar(&gf.check, "check", "", "compare the schema hashes this generated file records with SERVER's tools")
	a.addClientFlags(cmd, &cf, 30*time.Second)
	addModeFlags(cmd, &cf, true)
	return cmd
}

// genTools reads the tools to generate code for: a server's, or a common
// schema's.
func (a *app) genTools(ctx context.Context, cf clientFlags, schema, target string) (clientgen.Source, []clientgen.Tool, error) {
	if schema != "" {
		return a.schemaTool(ctx, cf, schema)
	}
	if !cf.stateless {
		// A session of its own: a stateless client makes up the server's
		// name, which names the code.
		cf.stateful = true
	}
	cs, err := a.dial(ctx, cf, target, dialOptions{})
	if err != nil {
		return clientgen.Source{}, nil, err
	}
	defer cs.Close()
	listed, err := all(cs.Tools(ctx, nil))
	cs.answered(err)
	if err != nil {
		return clientgen.Source{}, nil, remoteFailure(ctx, "tools/list", target, cs.relays, err)
	}
	cs.rec.Tools, cs.rec.Announced = listed, announced(cs.ann)
	src := clientgen.Source{URL: cs.httpURL}
	if cs.httpURL == "" {
		src.Server, src.Relays = nostrx.EncodeNpub(cs.tg.key.Key), cs.relays
	}
	if res := cs.InitializeResult(); res != nil && res.ServerInfo != nil {
		src.Name = res.ServerInfo.Name
	}
	if src.Name == "" && cs.ann != nil {
		src.Name = cs.ann.Name
	}
	tools := make([]clientgen.Tool, 0, len(listed))
	for _, t := range listed {
		ct, err := genTool(t)
		if err != nil {
			return src, nil, remote(err)
		}
		tools = append(tools, ct)
	}
	return src, tools, nil
}

// genTool reads a listed tool for the generator.
func genTool(t *mcp.Tool) (clientgen.Tool, error) {
	out := clientgen.Tool{Name: t.Name, Description: t.Description}
	var err error
	if t.InputSchema != nil {
		if out.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
			return out, fmt.Errorf("tool %q: inputSchema: %w", t.Name, err)
		}
	}
	if t.OutputSchema != nil {
		if out.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return out, fmt.Errorf("tool %q: outputSchema: %w", t.Name, err)
		}
	}
	return out, nil
}

// schemaTool finds the tool of a common schema in the servers'
// announcements: the first whose own schemas hash to it.
func (a *app) schemaTool(ctx context.Context, cf clientFlags, schema string) (clientgen.Source, []clientgen.Tool, error) {
	prefix, whole, err := schemaArg(schema)
	if err != nil {
		return clientgen.Source{}, nil, err
	}
	pool := nostrx.NewPool(nostrx.PoolOptions{Relays: cf.relays, Logger: a.log})
	defer pool.Close()
	wait := relayWaitFor(cf.timeout)
	qctx, cancel := context.WithTimeout(ctx, wait)
	catalog, hash, err := fetchForSchema(qctx, pool, discovery.Filter{}, prefix, whole)
	cancel()
	if perr := (*schemaPrefixError)(nil); errors.As(err, &perr) {
		if perr.ambiguous() {
			return clientgen.Source{}, nil, perr
		}
		return clientgen.Source{}, nil, remote(perr)
	}
	if err != nil {
		return clientgen.Source{}, nil, noRelay(cf.relays, wait, err)
	}
	for _, s := range catalog.Servers(discovery.Filter{SchemaHash: hash}) {
		for _, t := range s.Tools {
			if t.SchemaHash == hash && t.Verified {
				tool := clientgen.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
				return clientgen.Source{Schema: hash, Relays: cf.relays}, []clientgen.Tool{tool}, nil
			}
		}
	}
	return clientgen.Source{}, nil, remote(fmt.Errorf("no server announces a verified implementation of schema %s on %d relay(s) (see: cvm discover --schema %s)", hash, len(pool.Relays()), hash))
}

// genWrite generates the code and writes it where --out says.
func (a *app) genWrite(gf genFlags, src clientgen.Source, tools []clientgen.Tool) error {
	pkg := gf.pkg
	if pkg == "" {
		pkg = packageName(src.Name)
	}
	opts := clientgen.Options{Package: pkg, Source: src, Tools: tools}
	generate, ext := clientgen.Go, ".go"
	if gf.lang == "ts" {
		generate, ext = clientgen.TypeScript, ".ts"
	}
	code, err := generate(opts)
	if errors.Is(err, clientgen.ErrInvalidTool) || errors.Is(err, clientgen.ErrTooLarge) {
		return remote(fmt.Errorf("the server's tools: %w", err))
	}
	if err != nil {
		return err
	}
	if gf.out == "" || gf.out == "-" {
		_, err = a.stdout.Write(code)
		return err
	}
	path := gf.out
	if fi, err := os.Stat(path); err == nil && fi.IsDir() || strings.HasSuffix(path, string(filepath.Separator)) {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return err
		}
		path = filepath.Join(path, pkg+ext)
	}
	if err := os.WriteFile(path, code, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "wrote %s: %d tools\n", path, len(tools))
	return nil
}

// packageName makes a package name of a server's name: its lower-case
// ASCII letters and digits ("cvm demo server" → "cvmdemoserver"), else
// "client".
func packageName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' && b.Len() > 0 {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 || b.String() == "main" {
		return "client"
	}
	return clip(b.String(), 40)
}

// genCheck is cvm gen --check: the tools of SERVER compared with the
// schema hashes FILE records.
func (a *app) genCheck(ctx context.Context, cf clientFlags, file, target string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	recorded, err := clientgen.Recorded(src)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	_, tools, err := a.genTools(ctx, cf, "", target)
	if err != nil {
		return err
	}
	changes, err := clientgen.Compare(recorded, tools)
	if err != nil {
		return remote(err)
	}
	if a.jsonOut {
		if err := a.printJSON(nonNil(changes)); err != nil {
			return err
		}
	} else {
		for _, c := range changes {
			fmt.Fprintf(a.stdout, "%s\t%s\n", c.What, c.Tool)
		}
	}
	if len(changes) > 0 {
		return remote(fmt.Errorf("%s no longer matches %s: %d tool(s) changed, added or removed; generate it again (cvm gen)", file, target, len(changes)))
	}
	fmt.Fprintf(a.stderr, "%s matches %s: %d tools\n", file, target, len(tools))
	return nil
}
