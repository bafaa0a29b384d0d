// Command backends compares cvm's two crypto builds with the reference
// TypeScript pair: it builds bench/cvmbench twice (pure Go, and with
// -tags libsecp256k1), runs the two alternately, one at a time, N times
// each (every run also measures the reference pair on the same relay), and
// prints the medians: p50 per mode, its ratio to the reference pair's, and
// cvm's CPU per call split by category.
//
//	go run ./bench/backends [-n 5]     # from the repository root; make bench-crypto
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

var (
	runs  = flag.Int("n", 5, "runs of each build")
	goCmd = flag.String("go", "go", "the go command")
	extra = flag.String("args", "-sessions 0 -large 0 -paid-calls 0 -duration 1s", "flags for every cvmbench run")
)

// report is the part of cvmbench -json this driver reads.
type report struct {
	Backend string `json:"crypto_backend"`
	Results []struct {
		Pair  string  `json:"pair"`
		Mode  string  `json:"mode"`
		P50ms float64 `json:"p50_ms"`
		Error string  `json:"error"`
		CPU   *struct {
			CPUPerCallUs float64            `json:"cpu_us_per_call"`
			Us           map[string]float64 `json:"us_per_call"`
		} `json:"cpu"`
	} `json:"results"`
}

var builds = []struct{ name, tags, cgo string }{
	{"pure-go", "", "0"},
	{"libsecp256k1", "libsecp256k1", "1"},
}

var categories = []string{"sign", "verify", "ecdh+encrypt", "json", "websocket", "mcp-sdk", "runtime", "rest"}

func main() {
	flag.Parse()
	log.SetFlags(0)
	dir, err := os.MkdirTemp("", "cvm-backends-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bins := map[string]string{}
	for _, b := range builds {
		bins[b.name] = filepath.Join(dir, "cvmbench-"+b.name)
		cmd := exec.Command(*goCmd, "build", "-tags", b.tags, "-o", bins[b.name], "./bench/cvmbench")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("building cvmbench (%s): %v", b.name, err)
		}
	}
	// key: build/pair/mode/figure → one value per run
	samples := map[string][]float64{}
	add := func(k string, v float64) { samples[k] = append(samples[k], v) }
	for i := range *runs {
		for _, b := range builds {
			fmt.Fprintf(os.Stderr, "run %d/%d: %s\n", i+1, *runs, b.name)
			out, err := exec.Command(bins[b.name], append([]string{"-json"}, strings.Fields(*extra)...)...).Output()
			var rep report
			// Exit status 1: some figure was not measured; the report
			// says which, and the others stand.
			if exit := (*exec.ExitError)(nil); err == nil || errors.As(err, &exit) && exit.ExitCode() == 1 {
				err = json.Unmarshal(out, &rep)
			}
			if err != nil || rep.Backend != b.name {
				log.Fatalf("cvmbench (%s): %v (backend %q)", b.name, err, rep.Backend)
			}
			p50 := map[string]float64{}
			for _, r := range rep.Results {
				if r.Error != "" {
					log.Printf("%s %s %s: %s", b.name, r.Pair, r.Mode, r.Error)
					continue
				}
				p50[r.Pair+"/"+r.Mode] = r.P50ms
				add(b.name+"/"+r.Pair+"/"+r.Mode+"/p50", r.P50ms)
				if r.CPU != nil {
					add(b.name+"/"+r.Mode+"/cpu", r.CPU.CPUPerCallUs)
					for _, c := range categories {
						add(b.name+"/"+r.Mode+"/"+c, r.CPU.Us[c])
					}
				}
			}
			for _, mode := range []string{"plaintext", "encrypted"} {
				if c, t := p50["cvm/"+mode], p50["ts/"+mode]; c > 0 && t > 0 {
					add(b.name+"/"+mode+"/ratio", c/t)
				}
			}
		}
	}
	med := func(k string) float64 {
		s := slices.Clone(samples[k])
		if len(s) == 0 {
			return 0
		}
		slices.Sort(s)
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "medians of %d interleaved runs per build\n\n", *runs)
	fmt.Fprintln(tw, "BUILD\tMODE\tcvm p50\tts p50\tcvm/ts p50\tgoal\tCPU/call\t"+strings.Join(categories, "\t"))
	goal := map[string]float64{"plaintext": 0.05, "encrypted": 0.06}
	for _, b := range builds {
		for _, mode := range []string{"plaintext", "encrypted"} {
			k := b.name + "/" + mode
			line := fmt.Sprintf("%s\t%s\t%.3f ms\t%.2f ms\t%.3f\t%.2f\t%.0f µs", b.name, mode,
				med(b.name+"/cvm/"+mode+"/p50"), med(b.name+"/ts/"+mode+"/p50"), med(k+"/ratio"), goal[mode], med(k+"/cpu"))
			for _, c := range categories {
				line += fmt.Sprintf("\t%.0f µs (%.0f%%)", med(k+"/"+c), 100*med(k+"/"+c)/med(k+"/cpu"))
			}
			fmt.Fprintln(tw, line)
		}
	}
	fmt.Fprintln(tw)
	for _, mode := range []string{"plaintext", "encrypted"} {
		p, f := med("pure-go/cvm/"+mode+"/p50"), med("libsecp256k1/cvm/"+mode+"/p50")
		if p > 0 {
			fmt.Fprintf(tw, "libsecp256k1 over pure-go, %s p50\t%.3f\n", mode, f/p)
		}
	}
	tw.Flush()
}
