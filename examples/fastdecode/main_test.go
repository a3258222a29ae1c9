package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/sse/step"
	"github.com/tickwire/tickwire/internal/shareddata"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errb bytes.Buffer
	status = run(args, &out, &errb)
	return out.String(), errb.String(), status
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFPLRaw(t *testing.T) {
	dir := shareddata.Path(t, "fast-vectors", "openfast_fpl")
	out, errs, st := runCLI(t, "-templates", filepath.Join(dir, "FASTTestTemplate.xml"), filepath.Join(dir, "messages.fast"))
	if st != 0 || errs != "" {
		t.Fatalf("status %d, stderr %q", st, errs)
	}
	ls := lines(out)
	if len(ls) != 3 {
		t.Fatalf("%d lines, want 3", len(ls))
	}
	var first struct {
		Template int            `json:"template"`
		Name     string         `json:"name"`
		Fields   map[string]any `json:"fields"`
	}
	dec := json.NewDecoder(strings.NewReader(ls[0]))
	dec.UseNumber()
	if err := dec.Decode(&first); err != nil {
		t.Fatal(err)
	}
	if first.Template != 35 || first.Name != "MDIncRefresh" {
		t.Errorf("header = %d %q", first.Template, first.Name)
	}
	// uint64 exact; the bytes say ...124 (data.xml has ...123).
	if got := first.Fields["SendingTime"]; got != json.Number("20061101132712124") {
		t.Errorf("SendingTime = %v", got)
	}
	entries := first.Fields["MDEntries"].([]any)
	e0 := entries[0].(map[string]any)
	if e0["MDEntryPx"] != "94.325" || e0["MDEntrySize"] != json.Number("50") {
		t.Errorf("entry 0 = %v", e0)
	}
	if _, ok := e0["NoMDEntries"]; ok {
		t.Error("sequence length printed")
	}
	if _, ok := entries[1].(map[string]any)["QuoteCondition"]; ok {
		t.Error("absent optional field printed")
	}
}

func TestComplex30000Len32LE(t *testing.T) {
	dir := shareddata.Path(t, "fast-vectors", "mfast_perf")
	out, errs, st := runCLI(t, "-templates", filepath.Join(dir, "example.xml"), "-framing", "len32le", filepath.Join(dir, "complex30000.dat"))
	if st != 0 || errs != "" {
		t.Fatalf("status %d, stderr %q", st, errs)
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct{ Name string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		counts[m.Name]++
	}
	if counts["MarketData"] != 29700 || counts["QuoteRequest"] != 300 || counts["Done"] != 1 {
		t.Errorf("counts = %v", counts)
	}
}

var errLine = regexp.MustCompile(`^fastdecode: [A-Z0-9]+ at byte [0-9]+: .*\n$`)

func TestErrors(t *testing.T) {
	dir := shareddata.Path(t, "fast-vectors", "openfast_fpl")
	tmpl := filepath.Join(dir, "FASTTestTemplate.xml")
	msgs, err := os.ReadFile(filepath.Join(dir, "messages.fast"))
	if err != nil {
		t.Fatal(err)
	}
	var len32 []byte
	len32 = binary.LittleEndian.AppendUint32(len32, 200)
	len32 = append(len32, msgs[:40]...)
	cutRec := binary.LittleEndian.AppendUint32(nil, 10)
	cutRec = append(cutRec, msgs[:10]...)
	for _, tc := range []struct {
		name    string
		data    []byte
		framing string
		code    string
		lines   int
	}{
		{"cut inside a message", msgs[:100], "raw", "SHORT at byte 67:", 2}, // the third message starts at 67
		{"cut after the presence map", msgs[:1], "raw", "SHORT at byte 0:", 0},
		{"unknown template", []byte{0xc0, 0x81, 0x80}, "raw", "D9 at byte 1:", 0},
		{"overflow", append([]byte{0xe0, 0xa3}, bytes.Repeat([]byte{0x7f}, 12)...), "raw", "D2", 0},
		{"record past the end", len32, "len32le", "SHORT at byte 0:", 0},
		{"cut length", []byte{1, 0}, "len32le", "SHORT at byte 0:", 0},
		{"message cut inside its record", cutRec, "len32le", "SHORT at byte 4:", 0},
	} {
		p := writeFile(t, "in", tc.data)
		out, errs, st := runCLI(t, "-templates", tmpl, "-framing", tc.framing, p)
		if st == 0 || !errLine.MatchString(errs) || !strings.Contains(errs, tc.code) {
			t.Errorf("%s: status %d stderr %q, want code %q", tc.name, st, errs, tc.code)
		}
		if n := len(lines(out)); out != "" && n != tc.lines || out == "" && tc.lines != 0 {
			t.Errorf("%s: %d lines before the error, want %d", tc.name, n, tc.lines)
		}
	}
	// Ending exactly at a message boundary is success.
	p := writeFile(t, "in", msgs[:40])
	if _, errs, st := runCLI(t, "-templates", tmpl, p); st != 0 {
		t.Errorf("boundary: status %d %q", st, errs)
	}
	if _, _, st := runCLI(t, "-templates", tmpl, filepath.Join(t.TempDir(), "missing")); st == 0 {
		t.Error("missing input accepted")
	}
}

// TestSTEP wraps the FPL messages in STEP envelopes: all three in one
// payload (decodable with the default reset per STEP message), then one per
// envelope, which needs -reset never because messages 2 and 3 use the
// dictionary state of the earlier ones.
func TestSTEP(t *testing.T) {
	dir := shareddata.Path(t, "fast-vectors", "openfast_fpl")
	tmpl := filepath.Join(dir, "FASTTestTemplate.xml")
	msgs, err := os.ReadFile(filepath.Join(dir, "messages.fast"))
	if err != nil {
		t.Fatal(err)
	}
	h := &step.Header{MsgType: []byte("UA3201"), SeqNum: 1, HasCategory: true, Category: 6, CategorySeq: 1}
	one := step.AppendMessage(nil, h, msgs)
	out, errs, st := runCLI(t, "-templates", tmpl, "-framing", "step", writeFile(t, "one", one))
	if st != 0 || len(lines(out)) != 3 {
		t.Fatalf("one payload: status %d, %d lines, %q", st, len(lines(out)), errs)
	}
	raw, _, _ := runCLI(t, "-templates", tmpl, filepath.Join(dir, "messages.fast"))
	if out != raw {
		t.Errorf("STEP output differs from raw output")
	}
	var three []byte
	for i, cut := range [][2]int{{0, 40}, {40, 67}, {67, 119}} {
		h.SeqNum, h.CategorySeq = uint64(i+1), uint64(i+1)
		three = step.AppendMessage(three, h, msgs[cut[0]:cut[1]])
	}
	p := writeFile(t, "three", three)
	if out, errs, st := runCLI(t, "-templates", tmpl, "-framing", "step", "-reset", "never", p); st != 0 || out != raw {
		t.Errorf("three payloads, -reset never: status %d %q", st, errs)
	}
	if _, errs, st := runCLI(t, "-templates", tmpl, "-framing", "step", p); st == 0 || !errLine.MatchString(errs) {
		t.Errorf("three payloads with per-message reset should fail (D5/D6): status %d %q", st, errs)
	}
	if _, errs, st := runCLI(t, "-templates", tmpl, "-framing", "step", writeFile(t, "cut", one[:len(one)-3])); st == 0 || !strings.Contains(errs, "SHORT") {
		t.Errorf("cut STEP message: status %d %q", st, errs)
	}
	// An error inside a payload is reported at its offset in the file.
	cutPayload := step.AppendMessage(nil, h, msgs[:100])
	_, rawErr, _ := runCLI(t, "-templates", tmpl, writeFile(t, "rawcut", msgs[:100]))
	_, stepErr, st := runCLI(t, "-templates", tmpl, "-framing", "step", writeFile(t, "stepcut", cutPayload))
	var rawOff, stepOff int
	fmt.Sscanf(rawErr[strings.Index(rawErr, "at byte"):], "at byte %d", &rawOff)
	fmt.Sscanf(stepErr[strings.Index(stepErr, "at byte"):], "at byte %d", &stepOff)
	if base := bytes.Index(cutPayload, msgs[:100]); st == 0 || stepOff != base+rawOff {
		t.Errorf("payload error at %d (%q), want %d+%d", stepOff, stepErr, base, rawOff)
	}
	bad := append([]byte(nil), one...)
	bad[len(bad)-2] ^= 1 // checksum digit
	if _, errs, st := runCLI(t, "-templates", tmpl, "-framing", "step", writeFile(t, "bad", bad)); st == 0 || !strings.Contains(errs, "STEP at byte 0") {
		t.Errorf("bad checksum: status %d %q", st, errs)
	}
}

// TestBinary builds the command and checks the exit status and the single
// stderr line from a real process, on input made of garbage.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := shareddata.Path(t, "fast-vectors", "openfast_fpl")
	bin := filepath.Join(t.TempDir(), "fastdecode")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	garbage := writeFile(t, "garbage", bytes.Repeat([]byte{0x00, 0x13, 0xff}, 100))
	cmd := exec.Command(bin, "-templates", filepath.Join(dir, "FASTTestTemplate.xml"), garbage)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("exit: %v", err)
	}
	if !errLine.MatchString(stderr.String()) {
		t.Errorf("stderr %q", stderr.String())
	}
}

func TestRenderJSON(t *testing.T) {
	ts, err := fast.ParseTemplates([]byte(`<templates>
<template name="T" id="9"><byteVector name="B"/><sequence name="S"><length name="N"/><uInt32 name="X"/></sequence>
<group name="G" presence="optional"><uInt32 name="Y" presence="optional"/></group><uInt64 name="U"/><decimal name="D"/></template></templates>`))
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := ts.ByID(9)
	var m fast.Message
	m.SetTemplate(tm)
	m.AddBytes([]byte{0xAB, 0x01})
	m.AddSequence(0)
	m.AddGroup()
	m.AddAbsent()
	m.AddUint(18446744073709551615)
	m.AddDecimal(-5, -3)
	enc, _ := fast.NewEncoder(ts, nil)
	b, err := enc.Encode(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := fast.NewDecoder(ts, nil)
	var got fast.Message
	if _, err := d.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"template":9,"name":"T","fields":{"B":"ab01","S":[],"G":{},"U":18446744073709551615,"D":"-0.005"}}` + "\n"
	if s := string(RenderJSON(nil, &got)); s != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
}
