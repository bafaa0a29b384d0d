package clientgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cvmgo/cvm/commonschema"
)

var (
	// ErrInvalidTool is a tool the generator cannot read: two of one name,
	// a schema that is not JSON, one whose hash cannot be computed.
	ErrInvalidTool = errors.New("clientgen: invalid tool")
	// ErrTooLarge is a tool list whose code would be unreasonably large.
	ErrTooLarge = errors.New("clientgen: schemas too large")
	// ErrNotGenerated is a file with no schema hashes recorded in it.
	ErrNotGenerated = errors.New("clientgen: no schema hashes recorded (not a file cvm gen wrote?)")
)

// hashMarker starts the comment line that records a tool's schema hash
// in generated code, Go and TypeScript alike: the marker, the tool's name
// as a JSON string, the hash.
const hashMarker = "// cvm:schema-hash "

// toolHash is t's CEP-15 schema hash: what --check compares.
func toolHash(t Tool) (string, error) {
	in := t.InputSchema
	if !hasSchema(in) {
		in = json.RawMessage(`{"type":"object"}`)
	}
	h, err := commonschema.Hash(commonschema.Tool{Name: t.Name, InputSchema: in, OutputSchema: t.OutputSchema})
	if err != nil {
		return "", fmt.Errorf("%w: tool %q: %w", ErrInvalidTool, clip(t.Name, 80), err)
	}
	return h, nil
}

// hashLines are the marker lines of m's tools.
func hashLines(m *model) []string {
	lines := make([]string, len(m.tools))
	for i, t := range m.tools {
		// JSON escapes line ends and control characters; what
		// commentText escapes besides is written as JSON escapes too, so
		// the name reads back as it was.
		name, _ := json.Marshal(t.Name)
		lines[i] = hashMarker + commentText(string(name)) + " " + t.hash
	}
	return lines
}

// Recorded reads the schema hashes generated code records in its header,
// by tool name.
func Recorded(src []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "//") {
			break // the header ends: what follows (descriptions) is not read
		}
		rest, ok := strings.CutPrefix(line, hashMarker)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		var name string
		if i < 0 || json.Unmarshal([]byte(rest[:i]), &name) != nil {
			return nil, fmt.Errorf("clientgen: unreadable line %q", clip(sc.Text(), 120))
		}
		out[name] = rest[i+1:]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, ErrNotGenerated
	}
	return out, nil
}

// Change is a tool whose schemas differ from those code was generated
// from.
type Change struct {
	Tool string `json:"tool"`
	// What happened: "changed", "added" (the server has it, the code does
	// not) or "removed".
	What string `json:"what"`
}

// Compare says which of tools differ from the hashes recorded.
func Compare(recorded map[string]string, tools []Tool) ([]Change, error) {
	var out []Change
	live := map[string]bool{}
	for _, t := range tools {
		live[t.Name] = true
		h, err := toolHash(t)
		if err != nil {
			return nil, err
		}
		switch was, ok := recorded[t.Name]; {
		case !ok:
			out = append(out, Change{t.Name, "added"})
		case was != h:
			out = append(out, Change{t.Name, "changed"})
		}
	}
	for name := range recorded {
		if !live[name] {
			out = append(out, Change{name, "removed"})
		}
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Tool, b.Tool) })
	return out, nil
}
