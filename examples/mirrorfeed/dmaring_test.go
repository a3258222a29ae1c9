package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/internal/capgen"
)

// TestLinkDMARingSameOutput: the embedded feed read through a software NIC
// and a link/dmaring RX ring gives the same records, gaps, -raw files and
// summary counts as read directly.
func TestLinkDMARingSameOutput(t *testing.T) {
	runWith := func(extra ...string) (string, string, map[string]string) {
		dir := t.TempDir()
		var out, errOut bytes.Buffer
		args := append([]string{"-format", "json", "-raw", dir}, extra...)
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		files := map[string]string{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(b)
		}
		summary := summaryLine(errOut.String())
		return out.String(), summary, files
	}
	direct, dsum, dfiles := runWith()
	ring, rsum, rfiles := runWith("-link", "dmaring")
	if direct != ring {
		t.Fatal("records differ between the direct path and -link dmaring")
	}
	if dsum == "" || dsum != rsum {
		t.Fatalf("summaries differ:\n%s\n%s", dsum, rsum)
	}
	if len(dfiles) == 0 || len(dfiles) != len(rfiles) {
		t.Fatalf("-raw files: %d direct, %d ring", len(dfiles), len(rfiles))
	}
	for name, b := range dfiles {
		if rfiles[name] != b {
			t.Fatalf("-raw %s differs", name)
		}
	}
}

func TestLinkDMARingUsage(t *testing.T) {
	for _, args := range [][]string{{"-link", "rings"}, {"-link", "dmaring", "-iface", "lo"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	for _, q := range []string{"0", "65"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"-link", "dmaring", "-queues", q, "-quiet"}, &out, &errOut); code != 2 {
			t.Errorf("-queues %s: exit %d, want 2: %s", q, code, errOut.String())
		}
	}
}

// TestLinkDMARingQueuesSameOutput: a capture of many flows spread by RSS
// over 4 RX queues, each decoded on its own goroutine, gives the records,
// gaps, -raw files and summary of one queue: records in the same order
// within each flow direction, in any order across them.
func TestLinkDMARingQueuesSameOutput(t *testing.T) {
	dir := t.TempDir()
	_, pcapPath := writeFeed(t, dir, capgen.Options{Messages: 1200, Seed: 21, Flows: 16,
		Impair: capgen.Impairments{Loss: 0.01, Reorder: 0.05, Dup: 0.03, Overlap: 0.03}})
	runWith := func(queues string, more ...string) (map[string][]string, string, map[string]string) {
		raw := t.TempDir()
		var out, errOut bytes.Buffer
		args := append([]string{"-pcap", pcapPath, "-format", "json", "-raw", raw, "-link", "dmaring", "-queues", queues}, more...)
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		byFlow := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			_, rest, ok := strings.Cut(line, `"flow":"`)
			flow, _, ok2 := strings.Cut(rest, `"`)
			if !ok || !ok2 {
				t.Fatalf("-queues %s: record without a flow: %q", queues, line)
			}
			byFlow[flow] = append(byFlow[flow], line)
		}
		files := map[string]string{}
		entries, _ := os.ReadDir(raw)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(raw, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(b)
		}
		summary := summaryLine(errOut.String())
		return byFlow, summary, files
	}
	// -max-flows just large enough for the capture's flow directions
	// bounds the 4 queues together: RSS does not spread 16 flows evenly
	// over 4 queues, yet none of them runs short.
	tight := []string{"-max-flows", "32"}
	if testing.Short() {
		tight = nil
	}
	one, sum1, files1 := runWith("1", tight...)
	if tight != nil && (!strings.Contains(sum1, " 32 flow directions") || strings.Contains(sum1, "evictions")) {
		t.Fatalf("one queue with -max-flows 32 evicted flows: the capture has more directions than the test assumes:\n%s", sum1)
	}
	four, sum4, files4 := runWith("4", tight...)
	if len(one) < 16 {
		t.Fatalf("%d flow directions with records, want at least 16", len(one))
	}
	if !reflect.DeepEqual(one, four) {
		for flow, recs := range one {
			if !reflect.DeepEqual(recs, four[flow]) {
				t.Errorf("flow %s: %d records on 1 queue, %d on 4, or in another order", flow, len(recs), len(four[flow]))
				for i := range min(len(recs), len(four[flow])) {
					if recs[i] != four[flow][i] {
						t.Errorf("first difference, record %d:\n%s\n%s", i, recs[i], four[flow][i])
						break
					}
				}
			}
		}
		t.Fatalf("records differ between 1 and 4 queues (%d and %d flow directions)", len(one), len(four))
	}
	if sum1 == "" || sum1 != sum4 {
		t.Fatalf("summaries differ or are missing:\n%s\n%s", sum1, sum4)
	}
	if len(files1) == 0 || !reflect.DeepEqual(files1, files4) {
		t.Fatalf("-raw files differ: %d on 1 queue, %d on 4", len(files1), len(files4))
	}
}

// summaryLine returns the summary line of a run's stderr without its rate,
// which differs between runs (a slow run also prints progress lines).
func summaryLine(stderr string) string {
	summary := ""
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "summary:") {
			summary = l
		}
	}
	if i := strings.LastIndex(summary, ", "); i > 0 {
		summary = summary[:i]
	}
	return summary
}
