package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/captest"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

// convertCapture writes the Ethernet capture at path in link type link,
// with link/pcap's Writer, and returns the new file's path.
func convertCapture(t *testing.T, path string, link uint16) string {
	t.Helper()
	r, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := filepath.Join(t.TempDir(), frame.LinkTypeName(link)+".pcap")
	fh, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(fh, layers.LinkType(link), pcap.MaxRecordLen)
	if err != nil {
		t.Fatal(err)
	}
	batch := frame.NewBatch(16, pcap.MaxRecordLen)
	for {
		n, err := r.ReadFrames(batch)
		for _, f := range batch[:n] {
			if f.LinkType != frame.LinkTypeEthernet {
				t.Fatalf("%s: link type %d", path, f.LinkType)
			}
			if data, ok := captest.FromEthernet(f.Data(), link); ok {
				if err := w.WriteFrame(f.Time, data, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// timing is the part of the summary that depends on wall time.
var timing = regexp.MustCompile(`, \d+ records/s \(\d+\.\d+ s\)|\(decoding off, \d+\.\d+ s\)`)

// TestLinkTypesDecodeLikeEthernet converts a generated feed (with loss,
// reordering, duplicates, overlaps and VLAN tags) to every link type: each
// capture prints exactly the records, gaps and summary of the Ethernet
// original, in text and JSON, and -raw writes the same files.
func TestLinkTypesDecodeLikeEthernet(t *testing.T) {
	dir := t.TempDir()
	_, orig := writeFeed(t, dir, capgen.Options{Messages: 300, Seed: 12, Flows: 3, VLAN: 6, Impair: capgen.Impairments{Loss: 0.01, Reorder: 0.05, Dup: 0.03, Overlap: 0.03}})
	type result struct{ text, json, jsonSummary string }
	decode := func(path string) result {
		text, stderr, code := mirrorfeed(t, "-pcap", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", path, code, stderr)
		}
		js, summary, code := mirrorfeed(t, "-pcap", path, "-format", "json")
		if code != 0 {
			t.Fatalf("%s -format json: exit %d: %s", path, code, summary)
		}
		return result{timing.ReplaceAllString(text, ""), js, timing.ReplaceAllString(summary, "")}
	}
	want := decode(orig)
	if !strings.Contains(want.text, " gap ") && !strings.Contains(want.text, "\ngap ") {
		t.Fatalf("the feed has no gap: the test would not compare any\n%s", want.text)
	}
	wantRaw := rawFiles(t, orig)
	for _, link := range []uint16{frame.LinkTypeLinuxSLL, frame.LinkTypeLinuxSLL2, frame.LinkTypeRaw, frame.LinkTypeIPv4} {
		path := convertCapture(t, orig, link)
		got := decode(path)
		name := frame.LinkTypeName(link)
		if got.text != want.text {
			t.Errorf("%s: text output differs from Ethernet's\n got: %.2000s\nwant: %.2000s", name, got.text, want.text)
		}
		if got.json != want.json || got.jsonSummary != want.jsonSummary {
			t.Errorf("%s: JSON output differs from Ethernet's (summary %q, want %q)", name, got.jsonSummary, want.jsonSummary)
		}
		if gotRaw := rawFiles(t, path); !equalFiles(gotRaw, wantRaw) {
			t.Errorf("%s: -raw files differ from Ethernet's", name)
		}
	}
	t.Log(strings.TrimSpace(want.text[strings.LastIndex(want.text, "summary: "):]))
}

// rawFiles runs mirrorfeed -decode none -raw over path and returns the
// files it wrote, by name.
func rawFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	if _, stderr, code := mirrorfeed(t, "-pcap", path, "-decode", "none", "-raw", dir); code != 0 {
		t.Fatalf("%s -raw: exit %d: %s", path, code, stderr)
	}
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	if len(files) == 0 {
		t.Fatalf("%s: -raw wrote nothing", path)
	}
	return files
}

func equalFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// TestUnsupportedLinkType: a capture of a link type that is not decoded
// fails with an error naming it, instead of decoding to nothing; in a
// pcapng file, after the frames before the first such record.
func TestUnsupportedLinkType(t *testing.T) {
	dir := t.TempDir()
	_, orig := writeFeed(t, dir, capgen.Options{Messages: 20, Seed: 15})
	classic, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(classic[20:], 105)
	wifi := filepath.Join(dir, "wifi.pcap")
	if err := os.WriteFile(wifi, classic, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := mirrorfeed(t, "-pcap", wifi, "-quiet")
	if code != 1 || !strings.Contains(stderr, "unsupported link type 105 (IEEE802_11)") {
		t.Fatalf("classic 802.11: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// pcapng: an Ethernet interface whose frames decode, then a packet of
	// a second interface, 802.11.
	le := binary.LittleEndian
	b := interfaceFlood(0)
	idb := func(link uint32) {
		b = le.AppendUint32(b, 1)
		b = le.AppendUint32(b, 20)
		b = le.AppendUint32(b, link)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint32(b, 20)
	}
	epb := func(id uint32, data []byte) {
		padded := (len(data) + 3) &^ 3
		total := uint32(32 + padded)
		b = le.AppendUint32(b, 6)
		b = le.AppendUint32(b, total)
		b = le.AppendUint32(b, id)
		b = le.AppendUint64(b, 0)
		b = le.AppendUint32(b, uint32(len(data)))
		b = le.AppendUint32(b, uint32(len(data)))
		b = append(b, data...)
		b = append(b, make([]byte, padded-len(data))...)
		b = le.AppendUint32(b, total)
	}
	idb(1)
	idb(105)
	r, err := pcap.Open(orig)
	if err != nil {
		t.Fatal(err)
	}
	batch := frame.NewBatch(1024, 2048)
	n, _ := r.ReadFrames(batch)
	r.Close()
	for _, f := range batch[:n] {
		epb(0, f.Data())
	}
	epb(1, []byte("an 802.11 frame"))
	mixed := filepath.Join(dir, "mixed.pcapng")
	if err := os.WriteFile(mixed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = mirrorfeed(t, "-pcap", mixed, "-quiet")
	if code != 1 || !strings.Contains(stderr, "interface 1: unsupported link type 105 (IEEE802_11)") {
		t.Fatalf("pcapng with an 802.11 packet: exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout, "summary: ") || strings.HasPrefix(stdout, "summary: 0 records") {
		t.Fatalf("the frames before the 802.11 packet are not summarised: %q", stdout)
	}
	t.Log(strings.TrimSpace(stderr))
}
