package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// tinyParams keep every measure to a few tens of milliseconds (enough for
// some bytes to cross under -race): the tests check the plumbing, never the
// speed.
var tinyParams = params{rounds: 2, dur: 30 * time.Millisecond, conns: 40, fewConns: 8, udpPorts: 300}

// TestAllMeasuresJSON runs every measure with tiny counts and checks the
// JSON that -json prints: the fields of issue #5, ratio = tickwire /
// baseline, percentiles on latency measures only and in order.
func TestAllMeasuresJSON(t *testing.T) {
	out := runAll(measures, tinyParams, io.Discard)
	if out.err != nil {
		t.Fatal(out.err)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, out.results); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rows); err != nil {
		t.Fatalf("-json output is not a JSON array: %v\n%s", err, buf.Bytes())
	}
	byName := map[string]measure{}
	for _, m := range measures {
		byName[m.name] = m
	}
	seen := map[string]bool{}
	for _, row := range rows {
		name, _ := row["name"].(string)
		m, ok := byName[name]
		if !ok {
			t.Errorf("unknown measure %q", name)
			continue
		}
		seen[name] = true
		for _, f := range []string{"unit", "better", "baseline_name"} {
			if s, _ := row[f].(string); s == "" {
				t.Errorf("%s: %s missing or empty", name, f)
			}
		}
		if row["better"] != m.better || (m.better != lower && m.better != higher) {
			t.Errorf("%s: better = %v, want %s", name, row["better"], m.better)
		}
		num := func(f string) float64 {
			v, ok := row[f].(float64)
			if !ok {
				t.Errorf("%s: %s missing or not a number: %v", name, f, row[f])
			}
			return v
		}
		tw, base, ratio := num("tickwire"), num("baseline"), num("ratio")
		if tw <= 0 || base <= 0 {
			t.Errorf("%s: tickwire %v, baseline %v: want positive", name, tw, base)
		} else if math.Abs(ratio-tw/base) > 1e-9*math.Abs(ratio) {
			t.Errorf("%s: ratio %v != tickwire/baseline %v", name, ratio, tw/base)
		}
		if a := num("allocs_per_op"); a < 0 {
			t.Errorf("%s: allocs_per_op %v", name, a)
		}
		_, hasP50 := row["p50"]
		if hasP50 != m.latency {
			t.Errorf("%s: p50 present = %v, latency measure = %v", name, hasP50, m.latency)
		}
		if m.latency {
			p50, p99, p999 := num("p50"), num("p99"), num("p999")
			if !(p50 > 0 && p50 <= p99 && p99 <= p999) {
				t.Errorf("%s: percentiles out of order: %v %v %v", name, p50, p99, p999)
			}
			if p50 != tw {
				t.Errorf("%s: tickwire %v is not its p50 %v", name, tw, p50)
			}
		}
	}
	// The TAP measures run only as root on Linux (tap_other.go skips them
	// elsewhere).
	tapRuns := runtime.GOOS == "linux" && os.Geteuid() == 0
	xdpRuns := tapRuns && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64")
	for _, tool := range []string{"ethtool", "hping3"} {
		if _, err := exec.LookPath(tool); err != nil {
			xdpRuns = false
		}
	}
	for _, m := range measures {
		if !seen[m.name] && !(strings.HasPrefix(m.name, "tap_") && !tapRuns) && !(strings.HasPrefix(m.name, "xdp_") && !xdpRuns) {
			t.Errorf("measure %s missing from the JSON", m.name)
		}
	}

	var table bytes.Buffer
	writeTable(&table, out.results)
	if n := strings.Count(table.String(), "\n"); n != len(measures)+2 {
		t.Errorf("table has %d lines, want %d:\n%s", n, len(measures)+2, table.String())
	}
	dir := t.TempDir()
	if err := writePlots(dir, out.results); err != nil {
		t.Fatal(err)
	}
	for _, m := range measures {
		_, err := os.Stat(filepath.Join(dir, m.name+".svg"))
		if want := m.latency && seen[m.name]; want != (err == nil) {
			t.Errorf("%s: plot written = %v, want %v", m.name, err == nil, want)
		}
	}
}

func TestSelectMeasures(t *testing.T) {
	if got := selectMeasures(measures, nil, true); len(got) == 0 || len(got) >= len(measures) {
		t.Errorf("-quick selects %d of %d measures", len(got), len(measures))
	}
	for _, m := range selectMeasures(measures, nil, true) {
		if strings.HasPrefix(m.name, "tcp_10k") {
			t.Errorf("-quick selects %s", m.name)
		}
	}
	re := mustRegexp(t, "rtt")
	var names []string
	for _, m := range selectMeasures(measures, re, false) {
		names = append(names, m.name)
	}
	if got := strings.Join(names, " "); got != "tcp_rtt_64B udp_rtt_64B udp_rtt_64B_latency tcp_rtt_64B_latency tcp_rtt_64B_locked tap_tcp_rtt_64B tap_tcp_rtt_64B_latency tap_tcp_rtt_64B_latency_locked xdp_tcp_rtt_64B_latency" {
		t.Errorf("-only rtt selects %q", got)
	}
}

func TestSummarize(t *testing.T) {
	var r Result
	summarize(&r, false,
		[]sample{{value: 3, ops: 10, allocs: 5}, {value: 1, ops: 10, allocs: 5}, {value: 2}},
		[]sample{{value: 4}, {value: 8}, {value: 6}})
	if r.Tickwire != 2 || r.Baseline != 6 || r.Ratio != 2.0/6 || r.AllocsPerOp != 0.5 || r.P50 != nil {
		t.Errorf("rates: %+v", r)
	}

	lat := func(us ...int) []time.Duration {
		var d []time.Duration
		for _, u := range us {
			d = append(d, time.Duration(u)*time.Microsecond)
		}
		return d
	}
	var l Result
	hundred := make([]int, 1000)
	for i := range hundred {
		hundred[i] = i + 1 // 1..1000 us: p50 500, p99 990, p99.9 999
	}
	summarize(&l, true, []sample{{lat: lat(hundred...)}}, []sample{{lat: lat(1000)}})
	if *l.P50 != 500 || *l.P99 != 990 || *l.P999 != 999 || l.Tickwire != 500 || l.Baseline != 1000 || l.Ratio != 0.5 {
		t.Errorf("latencies: p50 %v p99 %v p999 %v tickwire %v baseline %v ratio %v", *l.P50, *l.P99, *l.P999, l.Tickwire, l.Baseline, l.Ratio)
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 || median(nil) != 0 {
		t.Error("median")
	}
}

func TestWriteCDF(t *testing.T) {
	mk := func(base time.Duration, n int) []time.Duration {
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = base + time.Duration(i*i)*time.Nanosecond
		}
		return d
	}
	var b bytes.Buffer
	err := writeCDF(&b, "x & y", []series{
		{name: "tickwire", color: "#d62728", sorted: mk(3*time.Microsecond, 2000)},
		{name: "kernel <loopback>", color: "#1f77b4", sorted: mk(15*time.Microsecond, 500)},
	})
	if err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	// Well-formed XML with an svg root, two curves and an escaped legend.
	dec := xml.NewDecoder(strings.NewReader(svg))
	polylines, root := 0, ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "polyline" {
				polylines++
			}
		}
	}
	if root != "svg" || polylines != 2 {
		t.Errorf("root %q, %d polylines", root, polylines)
	}
	for _, want := range []string{"x &amp; y", "kernel &lt;loopback&gt;: p50", "log scale", ">1<", ">10<", ">100<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if err := writeCDF(io.Discard, "empty", []series{{name: "none"}}); err == nil {
		t.Error("an empty series drew a chart")
	}
}

func TestRewriteReadme(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	orig := "# title\n\nintro\n\n" + measuresBegin + "\nold measures\n" + measuresEnd + "\n\nmiddle\n\n" + resultsBegin + "\nold results\n" + resultsEnd + "\n\nend\n"
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	p50 := 12.5
	results := []Result{{Name: "tcp_rtt_64B", Unit: "us", Better: lower, Tickwire: 12.5, Baseline: 25, BaselineName: "kernel", Ratio: 0.5, P50: &p50, P99: &p50, P999: &p50}}
	if err := rewriteReadme(path, results, tinyParams, []string{"-only", "rtt"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	for _, want := range []string{"# title\n\nintro\n\n", "\n\nmiddle\n\n", "\n\nend\n", "`tcp_rtt_64B` (us, lower is better", "go run ./bench -only rtt", "| tcp_rtt_64B | 12.5 us | 25.0 us (kernel) | 0.50x |", "cores"} {
		if !strings.Contains(got, want) {
			t.Errorf("README lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"old measures", "old results"} {
		if strings.Contains(got, gone) {
			t.Errorf("README still has %q", gone)
		}
	}
	os.WriteFile(path, []byte("no markers\n"), 0o644)
	if err := rewriteReadme(path, results, tinyParams, nil); err == nil {
		t.Error("a README without markers was rewritten")
	}
}

// BenchmarkMeasures runs the tickwire side of every measure, one sample
// per iteration, and reports its figure in the measure's unit; `go test
// -bench . -benchtime=1x` runs each once so none rots.
func BenchmarkMeasures(b *testing.B) {
	p := params{rounds: 1, dur: 100 * time.Millisecond, conns: 10000, fewConns: 100}
	for _, m := range measures {
		b.Run(m.name, func(b *testing.B) {
			pr, err := m.setup(p)
			if err != nil {
				b.Skip(err)
			}
			defer pr.close()
			b.ReportAllocs()
			var samples []sample
			for i := 0; i < b.N; i++ {
				s, err := pr.tickwire()
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, s)
			}
			var r Result
			summarize(&r, m.latency, samples, samples)
			b.ReportMetric(r.Tickwire, strings.ReplaceAll(m.unit, "/", "-per-"))
			b.ReportMetric(r.AllocsPerOp, "tw-allocs/op")
		})
	}
}

func mustRegexp(t *testing.T, s string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// TestFailedMeasureDoesNotStopTheRun checks that a measure failing (here
// its baseline) is reported as failed while the next one still runs, and
// that a skipped one is reported as skipped.
func TestFailedMeasureDoesNotStopTheRun(t *testing.T) {
	ok := func() (sample, error) { return sample{value: 1, ops: 1}, nil }
	fake := []measure{
		{name: "broken", unit: "x", better: higher, setup: func(params) (*pair, error) {
			return &pair{tickwire: ok, baseline: func() (sample, error) { return sample{}, errors.New("boom") }, close: func() {}}, nil
		}},
		{name: "skipped", unit: "x", better: higher, setup: func(params) (*pair, error) {
			return nil, fmt.Errorf("%w: not here", errSkip)
		}},
		{name: "fine", unit: "x", better: higher, setup: func(params) (*pair, error) {
			return &pair{tickwire: ok, baseline: ok, close: func() {}}, nil
		}},
	}
	out := runAll(fake, tinyParams, io.Discard)
	if out.err == nil || !strings.Contains(out.err.Error(), "boom") {
		t.Errorf("run error %v, want the failure", out.err)
	}
	if len(out.results) != 3 || !strings.HasPrefix(out.results[0].skipped, "failed: ") ||
		!strings.HasPrefix(out.results[1].skipped, "skipped: ") || out.results[2].skipped != "" || out.results[2].Ratio != 1 {
		t.Errorf("results %+v", out.results)
	}
	var b bytes.Buffer
	writeJSON(&b, out.results)
	if strings.Contains(b.String(), "broken") || strings.Contains(b.String(), `"skipped"`) || !strings.Contains(b.String(), `"fine"`) {
		t.Errorf("JSON lists what did not run: %s", b.String())
	}
}
