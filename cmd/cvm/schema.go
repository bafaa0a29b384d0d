package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cvmgo/cvm/commonschema"
	"github.com/spf13/cobra"
)

func (a *app) schemaCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Common tool schemas (CEP-15)",
		// Runnable only so that an unknown subcommand is a usage error (exit
		// 2) rather than help and success.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.schemaHashCommand())
	return cmd
}

func (a *app) schemaHashCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "hash [FILE|-]",
		Short: "Print the common-schema hash of a tool, or of every tool in a tools/list result",
		Long: `Print the CEP-15 schema hash of a tool definition: sha256 of the RFC 8785
canonical JSON of {name, inputSchema, outputSchema?}, computed exactly as the
reference SDK computes it (documentation members such as title and
description are left out at every depth). The input, read from FILE or from
standard input ("-" or no argument), is one tool (other members of a full tool
object are ignored), which prints the bare hash, or a tools/list result
{"tools":[…]} (also inside a JSON-RPC response), which prints "HASH NAME" for
each tool. --json prints [{"name":…,"schemaHash":…}] in both cases.

A property whose name the hash leaves out (a property called title, for
instance) is reported on stderr: two tools differing only there share a hash.`,
		Example: `  cvm schema hash tool.json
  cvm tools npub1… --json | cvm schema hash`,
		Args: positional(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			source, data, err := a.readInput(args)
			if err != nil {
				return err
			}
			tools, list, err := toolsOf(data)
			if err != nil {
				return fmt.Errorf("%s: %w", source, err)
			}
			hashes := make([]commonschema.ToolHash, 0, len(tools))
			for i, t := range tools {
				where := source
				if list {
					where = fmt.Sprintf("%s: tools[%d]", source, i)
				}
				hash, err := commonschema.Hash(t)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				uncovered, err := commonschema.UncoveredProperties(t)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				for _, p := range uncovered {
					fmt.Fprintf(a.stderr, "cvm: warning: tool %q: %s is not covered by the schema hash (CEP-15 drops members with that name)\n", t.Name, p)
				}
				hashes = append(hashes, commonschema.ToolHash{Name: t.Name, Hash: hash})
			}
			switch {
			case a.jsonOut:
				return a.printJSON(hashes)
			case !list:
				_, err = fmt.Fprintln(a.stdout, hashes[0].Hash)
				return err
			}
			for _, h := range hashes {
				if _, err := fmt.Fprintf(a.stdout, "%s %s\n", h.Hash, h.Name); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// readInput reads the file named by args, or standard input for "-" or no
// argument, and returns a name for it to use in messages.
func (a *app) readInput(args []string) (string, []byte, error) {
	if len(args) == 0 || args[0] == "-" {
		data, err := io.ReadAll(a.stdin)
		if err != nil {
			return "", nil, fmt.Errorf("read standard input: %w", err)
		}
		return "stdin", data, nil
	}
	data, err := os.ReadFile(args[0])
	return args[0], data, err
}

// toolsOf decodes the input of "cvm schema hash": a single tool, a tools/list
// result, or a JSON-RPC response carrying one. list reports which.
func toolsOf(data []byte) (tools []commonschema.Tool, list bool, err error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, false, errNotATool
		}
		return nil, false, fmt.Errorf("invalid JSON: %w", err)
	}
	if doc == nil {
		return nil, false, errNotATool
	}
	if result, ok := doc["result"]; ok {
		var inner map[string]json.RawMessage
		if json.Unmarshal(result, &inner) == nil && inner["tools"] != nil {
			doc = inner
		}
	}
	raw, list := doc["tools"]
	if !list {
		var t commonschema.Tool
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, false, err
		}
		return []commonschema.Tool{t}, false, nil
	}
	var items []json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		err = json.Unmarshal(raw, &items)
	}
	if err != nil || items == nil {
		return nil, true, errors.New(`"tools" is not an array`)
	}
	tools = make([]commonschema.Tool, len(items))
	for i, item := range items {
		if err := json.Unmarshal(item, &tools[i]); err != nil {
			return nil, true, fmt.Errorf("tools[%d]: %w", i, err)
		}
	}
	return tools, true, nil
}

var errNotATool = errors.New(`want a tool definition {"name", "inputSchema", …} or a tools/list result {"tools": […]}, a JSON object`)
