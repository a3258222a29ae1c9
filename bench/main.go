// Command bench measures tickwire against kernel sockets and peer
// libraries, honestly and repeatably:
//
//	go run ./bench                     # every measure, Markdown table on stdout
//	go run ./bench -quick              # reduced set, under a minute
//	go run ./bench -only rtt -json     # JSON array, one object per measure
//	go run ./bench -plot /tmp/plots    # SVG latency CDFs, one per latency measure
//	go run ./bench -readme bench/README.md  # also rewrite the README's results
//
// Each measure runs several rounds, each round running tickwire then its
// baseline, so that the drift of a shared, noisy machine hits both; it
// reports medians over rounds and the ratio tickwire/baseline. Latency
// measures report p50, p99 and p99.9 (medians over rounds of each round's
// percentile). bench/README.md describes every measure.
//
// Root-only measures (tap_tcp_rtt_64B, tap_tcp_rtt_64B_latency, udp_mcast_rx_latency,
// xdp_tcp_rtt_64B_latency, xdp_capture_latency, xdp_rx_mpps) are skipped with a note otherwise.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"
)

func main() {
	quick := flag.Bool("quick", false, "run the reduced set, with fewer and shorter rounds")
	only := flag.String("only", "", "run only the measures whose name matches this regular expression")
	asJSON := flag.Bool("json", false, "print a JSON array instead of a Markdown table")
	plotDir := flag.String("plot", "", "write an SVG latency CDF per latency measure into this directory")
	readme := flag.String("readme", "", "rewrite the results section of this README (between its markers)")
	rounds := flag.Int("rounds", 0, "rounds per measure (0: 5)")
	flag.Parse()

	p := fullParams
	if *quick {
		p = quickParams
	}
	if *rounds > 0 {
		p.rounds = *rounds
	}
	var re *regexp.Regexp
	if *only != "" {
		var err error
		if re, err = regexp.Compile(*only); err != nil {
			fatalf("-only: %v", err)
		}
	}
	sel := selectMeasures(measures, re, *quick)
	if len(sel) == 0 {
		fatalf("no measure matches -only %q", *only)
	}

	// An interrupted run still removes its namespaces and devices: the
	// measures' cleanups run when main returns, so leave through it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan runOutput, 1)
	go func() { done <- runAll(sel, p, os.Stderr) }()
	var out runOutput
	select {
	case out = <-done:
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "bench: %v: cleaning up\n", s)
		cleanupStale()
		os.Exit(1)
	}
	if *asJSON {
		if err := writeJSON(os.Stdout, out.results); err != nil {
			fatalf("%v", err)
		}
	} else {
		writeTable(os.Stdout, out.results)
	}
	if *plotDir != "" {
		if err := writePlots(*plotDir, out.results); err != nil {
			fatalf("-plot: %v", err)
		}
	}
	if out.err != nil {
		fatalf("%v", out.err) // the README keeps its last complete results
	}
	if *readme != "" {
		if err := rewriteReadme(*readme, out.results, p, os.Args[1:]); err != nil {
			fatalf("-readme: %v", err)
		}
	}
}

type runOutput struct {
	results []Result
	err     error // the first measure that failed
}

// runAll runs the measures in order, reporting progress on log. A measure
// that fails is reported as such (in the table, not in the JSON) and the
// others still run.
func runAll(sel []measure, p params, log io.Writer) runOutput {
	var out runOutput
	for _, m := range sel {
		r, err := run(m, p, func(s string) { fmt.Fprintf(log, "bench: %s\n", s) })
		if err != nil {
			if out.err == nil {
				out.err = err
			}
			r = Result{Name: m.name, skipped: "failed: " + err.Error()}
		}
		if r.skipped != "" {
			fmt.Fprintf(log, "bench: %s %s\n", m.name, r.skipped)
		}
		out.results = append(out.results, r)
	}
	return out
}

// writeJSON prints the measured results (skipped measures left out) as a
// JSON array.
func writeJSON(w io.Writer, results []Result) error {
	ran := []Result{}
	for _, r := range results {
		if r.skipped == "" {
			ran = append(ran, r)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(ran)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}
