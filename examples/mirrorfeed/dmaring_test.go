package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		summary := errOut.String()
		if i := strings.LastIndex(summary, ", "); i > 0 { // the rate differs
			summary = summary[:i]
		}
		return out.String(), summary, files
	}
	direct, dsum, dfiles := runWith()
	ring, rsum, rfiles := runWith("-link", "dmaring")
	if direct != ring {
		t.Fatal("records differ between the direct path and -link dmaring")
	}
	if dsum != rsum {
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
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-link", "dmaring", "-queues", "2", "-quiet"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "RSS") {
		t.Errorf("-queues 2: exit %d: %s", code, errOut.String())
	}
}
