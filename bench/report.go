package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"
)

// writeTable prints results as a Markdown table.
func writeTable(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| measure | tickwire | baseline | ratio | better | tickwire p50 / p99 / p99.9 | baseline p50 / p99 / p99.9 | allocs/op |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		if r.skipped != "" {
			fmt.Fprintf(w, "| %s | %s | | | | | | |\n", r.Name, r.skipped)
			continue
		}
		twLat, baseLat := "", ""
		if r.P50 != nil {
			twLat = fmt.Sprintf("%s / %s / %s us", num(*r.P50), num(*r.P99), num(*r.P999))
			baseLat = fmt.Sprintf("%s / %s / %s us", num(r.baseP50), num(r.baseP99), num(r.baseP999))
		}
		fmt.Fprintf(w, "| %s | %s %s | %s %s (%s) | %s | %s | %s | %s | %s |\n",
			r.Name, num(r.Tickwire), r.Unit, num(r.Baseline), r.Unit, r.BaselineName,
			ratio(r.Ratio), r.Better, twLat, baseLat, num(r.AllocsPerOp))
	}
}

// num formats v with three or so significant digits, large values with a
// k, M or G suffix.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a == 0:
		return "0"
	case a >= 0.01:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

func ratio(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.1fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

// README markers: rewriteReadme replaces what lies between each pair.
const (
	resultsBegin  = "<!-- bench:results:begin -->"
	resultsEnd    = "<!-- bench:results:end -->"
	measuresBegin = "<!-- bench:measures:begin -->"
	measuresEnd   = "<!-- bench:measures:end -->"
)

// rewriteReadme replaces the measures and results sections of the README
// at path (creating the file with both when it does not exist).
func rewriteReadme(path string, results []Result, p params, args []string) error {
	old, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		old = []byte("# bench\n\n## Measures\n\n" + measuresBegin + "\n" + measuresEnd + "\n\n## Results\n\n" + resultsBegin + "\n" + resultsEnd + "\n")
	} else if err != nil {
		return err
	}
	var m bytes.Buffer
	for _, ms := range measures {
		fmt.Fprintf(&m, "- `%s` (%s, %s is better; baseline: %s): %s\n", ms.name, ms.unit, ms.better, ms.baselineName, ms.doc)
	}
	out, err := replaceBetween(old, measuresBegin, measuresEnd, m.Bytes())
	if err != nil {
		return err
	}
	var r bytes.Buffer
	cmd := "go run ./bench"
	if len(args) > 0 {
		cmd += " " + strings.Join(args, " ")
	}
	fmt.Fprintf(&r, "Command: `%s` (%d rounds per measure, %v per sample), %s.\n\n", cmd, p.rounds, p.dur, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&r, "Machine: %s, %s, %d cores (GOMAXPROCS %d), %s/%s, Linux %s.\n\n", runtime.Version(), cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, kernelRelease())
	writeTable(&r, results)
	out, err = replaceBetween(out, resultsBegin, resultsEnd, r.Bytes())
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// replaceBetween replaces the text between the lines begin and end.
func replaceBetween(doc []byte, begin, end string, with []byte) ([]byte, error) {
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("markers %q and %q not found in order", begin, end)
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(begin)])
	b.WriteByte('\n')
	b.Write(with)
	b.Write(doc[j:])
	return b.Bytes(), nil
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
