package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
)

// The categories a call's CPU is split into. A sample goes to the category
// of the innermost frame of its stack that matches one of these patterns
// (so sha256 under VerifySignature is verifying, and encoding/json under the
// MCP SDK is JSON); a stack that matches none is "runtime" when it is the
// Go runtime's own (GC workers, the scheduler) and "rest" otherwise.
var categories = []struct {
	name string
	re   *regexp.Regexp
}{
	{"sign", regexp.MustCompile(`^(fiatjaf\.com/nostr\.\(\*Event\)\.Sign|github\.com/cvmgo/cvm/internal/secp\.\(\*Key\)\.Sign|github\.com/cvmgo/cvm/contextvm\.\(\*KeySigner\)\.SignEvent|github\.com/btcsuite/btcd/btcec/v2/schnorr\.Sign)$`)},
	{"verify", regexp.MustCompile(`^fiatjaf\.com/nostr\.(\(\*Event\)|Event)\.(VerifySignature|CheckID)$`)},
	{"ecdh+encrypt", regexp.MustCompile(`^(fiatjaf\.com/nostr/nip44\.|github\.com/cvmgo/cvm/internal/secp\.ConversationKey)`)},
	{"json", regexp.MustCompile(`^(encoding/json\.|github\.com/mailru/easyjson|fiatjaf\.com/nostr\.((\(\*Event\)|Event)\.(MarshalJSON|UnmarshalJSON|String)|ParseMessage|(\(\*\w+Envelope\)|\w+Envelope)\.(MarshalJSON|UnmarshalJSON|FromJSON)|easyjson)|github\.com/segmentio/encoding|github\.com/modelcontextprotocol/go-sdk/internal/json|github\.com/modelcontextprotocol/go-sdk/jsonrpc\.|github\.com/tidwall/)`)},
	{"websocket", regexp.MustCompile(`^(github\.com/coder/websocket|github\.com/cvmgo/cvm/internal/wsconn|net\.|internal/poll\.|syscall\.|crypto/tls)`)},
	{"mcp-sdk", regexp.MustCompile(`^(github\.com/modelcontextprotocol/go-sdk|github\.com/google/jsonschema-go|github\.com/yosida95/uritemplate)`)},
}

// breakdownOrder is the order categories are printed in.
var breakdownOrder = []string{"sign", "verify", "ecdh+encrypt", "json", "websocket", "mcp-sdk", "runtime", "rest"}

// breakdown is the CPU of one measurement split by category, per call.
type breakdown struct {
	CPUPerCallUs float64            `json:"cpu_us_per_call"`
	Us           map[string]float64 `json:"us_per_call"`
}

// profileFile is where -cpuprofile asks the profile of mode to go, or "".
func profileFile(mode string) string {
	if *cpuprof == "" {
		return ""
	}
	ext := filepath.Ext(*cpuprof)
	return strings.TrimSuffix(*cpuprof, ext) + "-" + mode + ext
}

// profileCPU runs f under the CPU profiler and splits the CPU it used over
// calls calls by category; it also writes the profile to file unless file
// is "".
func profileCPU(calls int, file string, f func() error) (breakdown, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return breakdown{}, err
	}
	ferr := f()
	pprof.StopCPUProfile()
	if ferr != nil {
		return breakdown{}, ferr
	}
	if file != "" {
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			return breakdown{}, err
		}
	}
	stacks, err := parseProfile(&buf)
	if err != nil {
		return breakdown{}, err
	}
	b := breakdown{Us: map[string]float64{}}
	var total int64
	for _, s := range stacks {
		total += s.nanos
		b.Us[classify(s.frames)] += float64(s.nanos) / 1e3 / float64(calls)
	}
	b.CPUPerCallUs = float64(total) / 1e3 / float64(calls)
	return b, nil
}

func classify(frames []string) string {
	for _, fn := range frames { // innermost first
		for _, c := range categories {
			if c.re.MatchString(fn) {
				return c.name
			}
		}
	}
	if len(frames) > 0 && strings.HasPrefix(frames[len(frames)-1], "runtime.") {
		return "runtime"
	}
	return "rest"
}

// stack is one sample of a CPU profile: function names innermost first and
// the CPU time it stands for.
type stack struct {
	frames []string
	nanos  int64
}

// parseProfile decodes the few fields of a gzipped profile.proto (see
// github.com/google/pprof/proto/profile.proto) a breakdown needs: samples'
// location ids and values, locations' lines, functions' names and the
// string table. Go's CPU profiles are symbolized, so no binary is needed.
func parseProfile(r io.Reader) ([]stack, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	type sample struct{ locs, values []uint64 }
	var (
		samples   []sample
		locFuncs  = map[uint64][]uint64{} // location id → function ids, innermost first
		funcNames = map[uint64]uint64{}   // function id → string index
		strs      []string
	)
	err = fields(data, func(num int, v uint64, b []byte) error {
		switch num {
		case 2: // Sample
			var s sample
			err := fields(b, func(num int, v uint64, b []byte) error {
				switch num {
				case 1:
					s.locs = appendPacked(s.locs, v, b)
				case 2:
					s.values = appendPacked(s.values, v, b)
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // Location
			var id uint64
			var fns []uint64
			err := fields(b, func(num int, v uint64, b []byte) error {
				switch num {
				case 1:
					id = v
				case 4: // Line
					return fields(b, func(num int, v uint64, _ []byte) error {
						if num == 1 {
							fns = append(fns, v)
						}
						return nil
					})
				}
				return nil
			})
			locFuncs[id] = fns
			return err
		case 5: // Function
			var id, name uint64
			err := fields(b, func(num int, v uint64, _ []byte) error {
				switch num {
				case 1:
					id = v
				case 2:
					name = v
				}
				return nil
			})
			funcNames[id] = name
			return err
		case 6:
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]stack, 0, len(samples))
	for _, s := range samples {
		if len(s.values) < 2 {
			continue
		}
		st := stack{nanos: int64(s.values[1])} // values: samples/count, cpu/nanoseconds
		for _, l := range s.locs {
			for _, fn := range locFuncs[l] {
				if i := funcNames[fn]; i < uint64(len(strs)) {
					st.frames = append(st.frames, strs[i])
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// appendPacked appends a repeated varint field, packed (b) or not (v).
func appendPacked(dst []uint64, v uint64, b []byte) []uint64 {
	if b == nil {
		return append(dst, v)
	}
	for len(b) > 0 {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return dst
		}
		dst = append(dst, x)
		b = b[n:]
	}
	return dst
}

var errProto = errors.New("malformed profile")

// fields calls f for each field of a protobuf message: varints with v,
// length-delimited fields with b (non-nil).
func fields(data []byte, f func(num int, v uint64, b []byte) error) error {
	for len(data) > 0 {
		key, n := binary.Uvarint(data)
		if n <= 0 {
			return errProto
		}
		data = data[n:]
		num, typ := int(key>>3), key&7
		switch typ {
		case 0:
			v, n := binary.Uvarint(data)
			if n <= 0 {
				return errProto
			}
			data = data[n:]
			if err := f(num, v, nil); err != nil {
				return err
			}
		case 2:
			l, n := binary.Uvarint(data)
			if n <= 0 || uint64(len(data)-n) < l {
				return errProto
			}
			b := data[n : n+int(l)]
			data = data[n+int(l):]
			if b == nil {
				b = []byte{}
			}
			if err := f(num, 0, b); err != nil {
				return err
			}
		case 1:
			if len(data) < 8 {
				return errProto
			}
			data = data[8:]
		case 5:
			if len(data) < 4 {
				return errProto
			}
			data = data[4:]
		default:
			return fmt.Errorf("%w: wire type %d", errProto, typ)
		}
	}
	return nil
}
