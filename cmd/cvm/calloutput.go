package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// callOutputHelp is the part of cvm call's help on its output for
// scripts.
const callOutputHelp = `For scripts and agents, --raw prints only the CallToolResult, as one
line of JSON, without what cvm adds to it (the payments; with --schema,
the provider and attempts). --extract PATH prints only the part of it
PATH selects: a string as it is, anything else as compact JSON (with
--json a string is quoted too), then a newline. A result that is an error
is printed all the same. ` + extractGrammar

// callOutput is what cvm call prints on stdout for scripts: --raw or
// --extract PATH, instead of the result for people or --json.
type callOutput struct {
	raw     bool
	extract string
	path    jsonPath // extract, parsed by check
}

func addOutputFlags(cmd *cobra.Command, o *callOutput) {
	cmd.Flags().BoolVar(&o.raw, "raw", false, "print only the tool's result, as one line of JSON")
	cmd.Flags().StringVar(&o.extract, "extract", "", "print only the part of the result PATH selects (structuredContent.sum, content[0].text)")
	cmd.MarkFlagsMutuallyExclusive("raw", "extract")
}

// check reads PATH and refuses what cannot be printed with the rest,
// before anything is sent.
func (o *callOutput) check(cmd *cobra.Command, stream bool) error {
	if stream && (o.raw || cmd.Flags().Changed("extract")) {
		return errors.New("--stream writes the stream's chunks to stdout, --raw and --extract only the result: give one of them")
	}
	if !cmd.Flags().Changed("extract") {
		return nil
	}
	p, err := parsePath(o.extract)
	if err != nil {
		return fmt.Errorf("--extract %q: %w", o.extract, err)
	}
	o.path = p
	return nil
}

// scripted reports whether the result is printed for a script.
func (o *callOutput) scripted() bool { return o.raw || o.path != nil }

// print writes res as the flags ask: the whole of it (--raw) or what
// PATH selects, quoted when asJSON. A path that selects nothing prints
// nothing, and returns a noMatchError.
func (o *callOutput) print(w io.Writer, res *mcp.CallToolResult, asJSON bool) error {
	doc, err := plainJSON(res)
	if err != nil {
		return err
	}
	if o.raw {
		_, err = fmt.Fprintf(w, "%s\n", doc)
		return err
	}
	v, err := o.path.extract(doc)
	if err != nil {
		return fmt.Errorf("--extract %s: %w; see the whole result with --raw", o.path, err)
	}
	out, err := formatExtracted(v, asJSON)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// printScripted prints the result of tool name for a script; a result
// that is an error ends the command with exitToolError, after it is
// printed, whether or not PATH selected anything in it.
func (c *callCmd) printScripted(res *mcp.CallToolResult, name string) error {
	err := c.out.print(c.stdout, res, c.jsonOut)
	if res.IsError {
		return toolError(name, res)
	}
	return err
}

// toolError is the error of tool name's result that says isError.
func toolError(name string, res *mcp.CallToolResult) error {
	return withExit(exitToolError, remote(fmt.Errorf("tool %s reported an error: %s", name, oneLine(contentText(res.Content)))))
}
