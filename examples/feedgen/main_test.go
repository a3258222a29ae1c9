package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/internal/capgen"
)

func TestWritesPcapAndTruth(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "feed.pcap")
	args := []string{"-o", out, "-messages", "200", "-seed", "9", "-flows", "2", "-loss", "0.02", "-reorder", "0.05", "-dup", "0.05", "-overlap", "0.05", "-vlan", "100"}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "2 flows, 200 messages") {
		t.Errorf("summary %q", stdout.String())
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := os.Open(out + ".truth.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	lines, err := capgen.ReadTruth(tf)
	if err != nil {
		t.Fatal(err)
	}
	flows := 0
	for _, l := range lines {
		if l.Type == "flow" {
			flows++
		}
	}
	if flows != 2 || len(lines) < 200 {
		t.Errorf("truth: %d lines, %d flows", len(lines), flows)
	}
	// Deterministic: the same arguments write the same bytes.
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatal(stderr.String())
	}
	second, _ := os.ReadFile(out)
	if !bytes.Equal(first, second) {
		t.Error("the same seed wrote different captures")
	}
}

func TestBadArguments(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{},
		{"-o", filepath.Join(dir, "x.pcap"), "-loss", "2"},
		{"-o", filepath.Join(dir, "x.pcap"), "-vlan", "5000"},
		{"-o", filepath.Join(dir, "x.pcap"), "-messages", "-3"},
		{"-o", filepath.Join(dir, "x.pcap"), "-nosuchflag"},
		{"-o", filepath.Join(dir, "no", "such", "dir", "x.pcap")},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code == 0 || stderr.Len() == 0 {
			t.Errorf("run(%q) = %d with stderr %q, want a failure with a message", args, code, stderr.String())
		}
	}
}
