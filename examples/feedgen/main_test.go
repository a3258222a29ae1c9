package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
	summary := stdout.String()
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out + ".truth.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(raw, []byte(`\u00`)); i >= 0 {
		t.Errorf("truth file escapes a character: %q", raw[max(i-20, 0):min(i+20, len(raw))])
	}
	if !bytes.Contains(raw, []byte(`"flow":"10.`)) || !bytes.Contains(raw, []byte(`->`)) {
		t.Errorf("truth file does not name flows as addr:port->addr:port: %.200s", raw)
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
	// The summary counts the lost bytes as bytes, and the STEP messages
	// and sequence gaps they make apart from them.
	var lostBytes uint64
	lostMessages := map[string]bool{}
	for _, l := range lines {
		for _, r := range l.Lost {
			lostBytes += r.Length
			for _, m := range lines {
				if m.Type == "record" && m.Flow == l.Flow && m.Start < r.Offset+r.Length && r.Offset < m.End {
					lostMessages[fmt.Sprint(m.Flow, m.SeqNum)] = true
				}
			}
		}
	}
	m := regexp.MustCompile(`, (\d+) bytes lost in TCP gaps, (\d+) STEP messages lost \((\d+) sequence gaps\); truth in `).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("summary %q does not say the bytes lost in TCP gaps and the STEP messages lost", summary)
	}
	if m[1] != fmt.Sprint(lostBytes) || m[2] != fmt.Sprint(len(lostMessages)) || lostBytes == 0 || m[3] == "0" {
		t.Errorf("summary %q: want %d bytes lost in TCP gaps, %d STEP messages lost, sequence gaps", summary, lostBytes, len(lostMessages))
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
