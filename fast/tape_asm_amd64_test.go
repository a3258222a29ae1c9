//go:build !purego

package fast

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tickwire/tickwire/internal/shareddata"
)

// Loop modes for the tests.
const (
	loopAsm      = iota // the assembly loop
	loopPortable        // fastLoop
	loopDiff            // both from the same state, compared, the assembly loop's result kept
)

// useLoop selects the loop runFast calls until the test ends. In loopDiff
// mode every difference fails t, and the returned counter counts the
// compared runs.
func useLoop(t testing.TB, mode int) *int {
	t.Helper()
	if mode != loopPortable && !haveAsmLoop {
		t.Skip("the CPU has no BMI2: no assembly loop")
	}
	on, check := asmLoopOn, loopCheck
	t.Cleanup(func() { asmLoopOn, loopCheck = on, check })
	runs := new(int)
	asmLoopOn, loopCheck = mode == loopAsm, nil
	if mode == loopDiff {
		loopCheck = func(d *Decoder, b []byte, full int, st *fastState, ft []fop, m *Message) int {
			*runs++
			why := diffLoops(t, d, b, st, ft, m)
			// The loops read at most 10 bytes past where they stop:
			// within the window, they read what they would in b.
			if len(b) < full && st.off+16 > len(b) {
				t.Fatalf("the loop ran to %d, too near the end of loopCheck's window (%d of %d bytes)", st.off, len(b), full)
			}
			return why
		}
	}
	return runs
}

// diffLoops runs the assembly loop on d, st and m, and fastLoop on copies
// of them, and fails t unless both leave the same exit, state, values,
// arena, dictionary, undo log and frames.
func diffLoops(t testing.TB, d *Decoder, b []byte, st *fastState, ft []fop, m *Message) int {
	t.Helper()
	d2, st2, m2 := cloneDecoder(d), *st, cloneMessage(m)
	start := *st
	why := d.asmFastLoop(b, st, ft, m)
	why2 := d2.fastLoop(b, &st2, ft, m2)
	end := min(st.pc, len(ft)-1)
	for _, o := range ft[min(start.pc, end) : max(start.pc, end)+1] { // pc goes back to repeat elements
		handlersReached[o.h] = true
	}
	if diff := diffStates(why, why2, st, &st2, d, d2, m, m2); diff != "" {
		t.Fatalf("assembly loop and fastLoop differ from %+v (instruction %+v) on %x: %s", start, ft[start.pc], b, diff)
	}
	return why
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := make([]byte, len(b), cap(b))
	copy(c, b)
	return c
}

func cloneDecoder(d *Decoder) *Decoder {
	c := *d
	c.dict = append([]entry(nil), d.dict...)
	c.undo = append(make([]undoRec, 0, cap(d.undo)), d.undo...)
	c.frames = append([]frame(nil), d.frames...)
	// One buffer for all the entries' bytes, each copy with its
	// original's capacity.
	size := 0
	for _, e := range d.dictBytes {
		size += cap(e.buf[0]) + cap(e.buf[1])
	}
	buf := make([]byte, size)
	carve := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		c := buf[:len(b):cap(b)]
		copy(c, b)
		buf = buf[cap(b):]
		return c
	}
	c.dictBytes = make([]entryBytes, len(d.dictBytes))
	for i, e := range d.dictBytes {
		c.dictBytes[i] = entryBytes{buf: [2][]byte{carve(e.buf[0]), carve(e.buf[1])}, cur: e.cur}
	}
	return &c
}

func cloneMessage(m *Message) *Message {
	c := *m
	c.Values = append(make([]Value, 0, cap(m.Values)), m.Values...)
	c.arena = cloneBytes(m.arena)
	return &c
}

func diffStates(why, why2 int, st, st2 *fastState, d, d2 *Decoder, m, m2 *Message) string {
	switch {
	case why != why2:
		return fmt.Sprintf("exit %d, fastLoop %d", why, why2)
	case *st != *st2:
		return fmt.Sprintf("state %+v, fastLoop %+v", *st, *st2)
	case !sameSlice(m.Values, m2.Values):
		return fmt.Sprintf("values\n%+v\nfastLoop\n%+v", m.Values, m2.Values)
	case !bytes.Equal(m.arena, m2.arena) || cap(m.arena) != cap(m2.arena):
		return fmt.Sprintf("arena %x, fastLoop %x", m.arena, m2.arena)
	case !sameSlice(d.dict, d2.dict):
		return fmt.Sprintf("dictionary %+v, fastLoop %+v", d.dict, d2.dict)
	case !sameSlice(d.undo, d2.undo) || cap(d.undo) != cap(d2.undo):
		return fmt.Sprintf("undo log %+v, fastLoop %+v", d.undo, d2.undo)
	case !sameSlice(d.frames, d2.frames):
		return fmt.Sprintf("frames %+v, fastLoop %+v", d.frames, d2.frames)
	}
	for i := range d.dictBytes {
		a, b := d.dictBytes[i], d2.dictBytes[i]
		same := a.cur == b.cur
		for k := range a.buf {
			same = same && bytes.Equal(a.buf[k], b.buf[k]) && cap(a.buf[k]) == cap(b.buf[k])
		}
		if !same {
			return fmt.Sprintf("dictionary bytes %d: %x/%d %x/%d cur %d, fastLoop %x/%d %x/%d cur %d", i,
				a.buf[0], cap(a.buf[0]), a.buf[1], cap(a.buf[1]), a.cur, b.buf[0], cap(b.buf[0]), b.buf[1], cap(b.buf[1]), b.cur)
		}
	}
	return ""
}

// sameSlice reports whether a and b hold equal elements (nil and empty
// are the same).
func sameSlice[E any](a, b []E) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// TestAsmLayout checks the sizes tape_asm_amd64.s computes with shifts and
// scaled indexes instead of go_asm.h's constants.
func TestAsmLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"Value", unsafe.Sizeof(Value{}), 32},
		{"entry", unsafe.Sizeof(entry{}), 24},
		{"undoRec", unsafe.Sizeof(undoRec{}), 32},
		{"Value.End", unsafe.Offsetof(Value{}.End), 12},
		{"fop.flags", unsafe.Sizeof(fop{}.flags), 2},
		{"fop.slot", unsafe.Sizeof(fop{}.slot), 4},
		{"fastState.exp", unsafe.Sizeof(fastState{}.exp), 4},
		{"frame.vi", unsafe.Sizeof(frame{}.vi), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, the assembly assumes %d", c.name, c.got, c.want)
		}
	}
	if fHasInit != 8 || stateAssigned != 1 || stateEmpty != 2 || presentTag != 1<<40 {
		t.Error("a constant the assembly hard-codes changed (fHasInit, stateAssigned, stateEmpty or presentTag)")
	}
}

// asmDiffTests are decoding tests whose decodes the differential mode
// checks loop run by loop run, and the portable mode runs on fastLoop
// (TestAsmLoopComplex30000 covers the tests of mFAST's file).
// The heavy ones are left out with -short and -race.
var asmDiffTests = []struct {
	name  string
	f     func(*testing.T)
	heavy bool
}{
	{"TapeMatchesReferenceComplex30000", TestTapeMatchesReferenceComplex30000, false},
	{"TapeMatchesReference", TestTapeMatchesReference, true},
	{"FastIntegers", TestFastIntegers, true},
	{"FastPathFuzzSeed", TestFastPathFuzzSeed, false},
	{"RoundTripRandomTemplates", TestRoundTripRandomTemplates, true},
	{"VectorFPLSpecExample", TestVectorFPLSpecExample, false},
	{"VectorCME", TestVectorCME, false},
	{"VectorFastfixBench", TestVectorFastfixBench, false},
	{"VectorRsFastlibSpec", TestVectorRsFastlibSpec, false},
	{"VectorGoFAST", TestVectorGoFAST, true},
	{"SpecIncrementWraps", TestSpecIncrementWraps, false},
	{"SpecNullableMax", TestSpecNullableMax, false},
	{"SpecOverlong", TestSpecOverlong, false},
	{"ResetPolicies", TestResetPolicies, false},
	{"DecodeErrors", TestDecodeErrors, false},
	{"NeedMoreBytesLeavesStateUnchanged", TestNeedMoreBytesLeavesStateUnchanged, false},
	{"Limits", TestLimits, false},
	{"ShortIntegers", TestShortIntegers, false},
	{"AsmLoopDecimals", TestAsmLoopDecimals, false},
}

// handlersReached records the code of the instructions the differential
// mode ran (or jumped over).
var handlersReached = map[uintptr]bool{}

// skipHeavy skips a heavy test with -short and -race.
func skipHeavy(t *testing.T, heavy bool) {
	if heavy && (testing.Short() || raceEnabled) {
		t.Skip("heavy differential test: skipped with -short and -race")
	}
}

// TestAsmLoopMatchesFastLoop runs the decoding tests with both loops from
// the same state at every run of the loop, comparing everything they
// leave.
func TestAsmLoopMatchesFastLoop(t *testing.T) {
	for _, c := range asmDiffTests {
		t.Run(c.name, func(t *testing.T) {
			skipHeavy(t, c.heavy)
			runs := useLoop(t, loopDiff)
			c.f(t)
			t.Logf("%d loop runs compared", *runs)
		})
	}
	for i, h := range handlerTable {
		if !handlersReached[h] && !testing.Short() && !raceEnabled {
			t.Errorf("no test ran the code of handler %d", i)
		}
	}
}

// TestPortableLoop runs the decoding tests on fastLoop, which the other
// tests bypass on amd64.
func TestPortableLoop(t *testing.T) {
	useLoop(t, loopPortable)
	for _, c := range asmDiffTests {
		t.Run(c.name, func(t *testing.T) {
			skipHeavy(t, c.heavy)
			c.f(t)
		})
	}
	t.Run("FastPathComplex30000", TestFastPathComplex30000)
	t.Run("VectorMFastComplex30000", TestVectorMFastComplex30000)
}

// TestAsmLoopComplex30000 compares the loops on every message of mFAST's
// file, each also cut at random points, and checks that the assembly loop
// decodes the whole file without leaving the fast path.
func TestAsmLoopComplex30000(t *testing.T) {
	ts, recs, _ := loadComplex30000(t)
	runs := useLoop(t, loopDiff)
	d := mustNew(t, ts)
	r := rand.New(rand.NewPCG(3, 4))
	var m Message
	for i, rec := range recs {
		if cut := r.IntN(len(rec)); i%7 == 0 {
			if _, err := d.Decode(rec[:cut], &m); Code(err) != "SHORT" {
				t.Fatalf("record %d cut at %d: %v", i, cut, err)
			}
		}
		if _, err := d.Decode(rec, &m); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if d.fastDone != uint64(len(recs)) || *runs < len(recs) {
		t.Errorf("%d loop runs for %d records; %d decoded on the fast path", *runs, len(recs), d.fastDone)
	}
}

// TestAsmLoopDoesNotAllocate decodes mFAST's file with the assembly loop.
func TestAsmLoopDoesNotAllocate(t *testing.T) {
	ts, recs, _ := loadComplex30000(t)
	useLoop(t, loopAsm)
	d := mustNew(t, ts)
	var m Message
	for _, rec := range recs[:1000] {
		if _, err := d.Decode(rec, &m); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	if a := testing.AllocsPerRun(5000, func() {
		if _, err := d.Decode(recs[i%1000], &m); err != nil {
			t.Fatal(err)
		}
		i++
	}); a != 0 {
		t.Errorf("%v allocations per message", a)
	}
}

// FuzzAsmLoop compares the loops on arbitrary bytes decoded with the fuzz
// templates, with mFAST's templates (when the shared data is there) and
// with the edge templates (under one of asmEdgeLimits), whole and cut
// short; then it decodes them with the assembly loop and guard pages
// after every buffer it reads or writes (guardedStream).
func FuzzAsmLoop(f *testing.F) { fuzzAsmLoop(f, false) }

// FuzzAsmLoopGuarded is FuzzAsmLoop's guarded half: the same streams
// decoded from the end of guarded memory, so that a read past the input
// faults. The two halves are separate targets so that each runs more than
// 1,000 inputs a second.
func FuzzAsmLoopGuarded(f *testing.F) { fuzzAsmLoop(f, true) }

// fuzzAsmLoop adds the seeds and runs either the differential decodings
// (the assembly loop against the reference decoder, on the fuzz, complex
// and edge templates) or, guarded, the streamed decodings in guarded
// memory.
func fuzzAsmLoop(f *testing.F, guarded bool) {
	f.Add(unhex(f, "e0a33a6f19bd23512e71364611bc83aab047455ab60560f5b286cb84ff7a26ba998380055994c9fd80"))
	f.Add(unhex(f, "c081"))
	fts, _ := fuzzDecoder(f)
	f.Add(fuzzMDSeed(f, fts))
	var cts *Templates
	if haveComplex30000() {
		var recs [][]byte
		cts, recs, _ = loadComplex30000(f)
		for _, i := range []int{0, 1, 2, 100, 5000} {
			f.Add(append([]byte(nil), recs[i]...))
		}
	}
	for k := range uint64(4) {
		f.Add(edgeStream(rand.New(rand.NewPCG(k, 13)), 3))
	}
	ets, err := ParseTemplates([]byte(asmEdgeTemplates))
	if err != nil {
		f.Fatal(err)
	}
	opts := &DecoderOptions{Limits: Limits{MaxSequenceLen: 64, MaxStringLen: 256, MaxByteVectorLen: 256}}
	// Decoders and guarded memory are made once: compiling the templates
	// and mapping guard pages cost more than decoding a short input.
	if guarded {
		fg := newGuardedDecoders(f, fts, opts, maxFuzzStream)
		var eg []*guardedDecoders
		for _, eopts := range asmEdgeLimits {
			eg = append(eg, newGuardedDecoders(f, ets, eopts, maxFuzzStream))
		}
		f.Fuzz(func(t *testing.T, b []byte) {
			if len(b) > maxFuzzStream {
				return
			}
			useLoop(t, loopDiff)
			r := rand.New(rand.NewPCG(uint64(len(b)), 9))
			fg.stream(t, r, b)
			eg[len(b)%len(asmEdgeLimits)].stream(t, r, b)
		})
		return
	}
	type pair struct{ dt, dr *Decoder }
	newPair := func(ts *Templates, opts *DecoderOptions) pair {
		dt, dr := decoderPair(f, ts, opts)
		return pair{dt, dr}
	}
	fd := newPair(fts, opts)
	var cd pair
	if cts != nil {
		cd = newPair(cts, nil)
	}
	var ed []pair
	for _, eopts := range asmEdgeLimits {
		ed = append(ed, newPair(ets, eopts))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzStream {
			return
		}
		useLoop(t, loopDiff)
		r := rand.New(rand.NewPCG(uint64(len(b)), 9))
		diffDecoders(t, r, fd.dt, fd.dr, b)
		if cts != nil {
			diffDecoders(t, r, cd.dt, cd.dr, b)
		}
		diffDecoders(t, r, ed[len(b)%len(asmEdgeLimits)].dt, ed[len(b)%len(asmEdgeLimits)].dr, b)
	})
}

// haveComplex30000 reports whether mFAST's file is in the shared data.
func haveComplex30000() bool {
	root := shareddata.Root()
	if root == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(root, "fast-vectors", "mfast_perf", "complex30000.dat"))
	return err == nil
}

// BenchmarkDecodeComplex30000Portable is BenchmarkDecodeComplex30000 on
// fastLoop: the baseline of the assembly loop, in the same run.
func BenchmarkDecodeComplex30000Portable(b *testing.B) {
	useLoop(b, loopPortable)
	BenchmarkDecodeComplex30000(b)
}

// TestAsmLoopDecimals compares the loops on decimals with individual
// operators of every kind the handlers tell apart (constant, default, copy,
// increment and delta exponents and mantissas, mandatory and optional),
// with random values encoded by the Encoder.
func TestAsmLoopDecimals(t *testing.T) {
	const xml = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
<template name="D" id="1">
 <decimal name="A"><exponent><constant value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
 <decimal name="B" presence="optional"><exponent><constant value="3"/></exponent><mantissa><copy/></mantissa></decimal>
 <decimal name="C" presence="optional"><exponent><default value="-1"/></exponent><mantissa><delta/></mantissa></decimal>
 <decimal name="E"><exponent><copy/></exponent><mantissa><increment value="5"/></mantissa></decimal>
 <decimal name="F" presence="optional"><exponent/><mantissa/></decimal>
 <decimal name="G"><exponent><delta/></exponent><mantissa><default value="7"/></mantissa></decimal>
 <decimal name="H" presence="optional"><copy/></decimal>
</template></templates>`
	ts, err := ParseTemplates([]byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	runs := useLoop(t, loopDiff)
	tm, _ := ts.ByID(1)
	enc, _ := NewEncoder(ts, nil)
	d := mustNew(t, ts)
	r := rand.New(rand.NewPCG(7, 8))
	var in, out Message
	var buf []byte
	exps := []int32{-2, 3, -1, 0, 1, 4, -5, 63, -63}
	for i := 0; i < 3000; i++ {
		in.SetTemplate(tm)
		mant := func() int64 { return int64(r.Uint64()>>(1+r.IntN(63))) - 1000 }
		exp := func() int32 { return exps[r.IntN(len(exps))] }
		in.AddDecimal(mant(), -2)
		for _, e := range []int32{3, exp(), exp(), exp(), exp(), exp()} {
			if r.IntN(3) == 0 && len(in.Values) != 3 && len(in.Values) != 5 {
				in.AddAbsent() // only optional ones: B, C, F, H
				continue
			}
			in.AddDecimal(mant(), e)
		}
		if buf, err = enc.Encode(buf[:0], &in); err != nil {
			// Not every random mix has an encoding (an increment
			// that cannot follow): start again.
			enc, d = mustEncoder(t, ts), mustNew(t, ts)
			continue
		}
		if _, err := d.Decode(buf, &out); err != nil {
			t.Fatalf("%x: %v", buf, err)
		}
	}
	if *runs == 0 || d.fastDone == 0 {
		t.Errorf("%d loop runs, %d messages on the fast path", *runs, d.fastDone)
	}
}

func mustEncoder(t testing.TB, ts *Templates) *Encoder {
	e, err := NewEncoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAsmLoopFuzzCorpus compares the loops on the committed corpora of the
// decoding fuzz targets, with the fuzz templates.
func TestAsmLoopFuzzCorpus(t *testing.T) {
	fts, _ := fuzzDecoder(t)
	opts := &DecoderOptions{Limits: Limits{MaxSequenceLen: 64, MaxStringLen: 256, MaxByteVectorLen: 256}}
	runs := useLoop(t, loopDiff)
	n := 0
	for _, target := range []string{"FuzzDecode", "FuzzTapeMatchesReference", "FuzzAsmLoop"} {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			b := readFuzzBytes(t, file)
			diffStream(t, rand.New(rand.NewPCG(uint64(len(b)), 10)), fts, opts, b)
			n++
		}
	}
	if n == 0 || *runs == 0 {
		t.Errorf("%d corpus files, %d loop runs compared", n, *runs)
	}
}

// readFuzzBytes reads the []byte argument of a "go test fuzz v1" file.
func readFuzzBytes(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
		t.Fatalf("%s: not a go test fuzz v1 file of one []byte", file)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return []byte(s)
}

// TestAsmLoopUnderProfiler decodes mFAST's file with the assembly loop
// while the CPU profiler interrupts it thousands of times a second: each
// signal unwinds the stack from wherever the loop is, in any of the pieces
// that jump to each other in asmLoop's frame, and must find its caller.
func TestAsmLoopUnderProfiler(t *testing.T) {
	if !haveAsmLoop {
		t.Skip("the CPU has no BMI2: no assembly loop")
	}
	ts, recs, _ := loadComplex30000(t)
	useLoop(t, loopAsm)
	d := mustNew(t, ts)
	var m Message
	runtime.SetCPUProfileRate(4000)
	defer runtime.SetCPUProfileRate(0)
	passes := 0
	for start := time.Now(); time.Since(start) < time.Second; passes++ {
		d.Reset()
		for i, rec := range recs {
			if _, err := d.Decode(rec, &m); err != nil {
				t.Fatalf("pass %d, record %d: %v", passes, i, err)
			}
		}
	}
	if want := uint64(passes * len(recs)); d.fastDone != want {
		t.Errorf("%d of %d messages on the fast path", d.fastDone, want)
	}
}

// TestAsmLoopUnderGC decodes mFAST's file with the assembly loop while
// another goroutine keeps the garbage collector running, and checks every
// message against fastLoop's: the assembly writes no pointer and is never
// stopped halfway, so collections must neither wait on it nor see a
// half-written state.
func TestAsmLoopUnderGC(t *testing.T) {
	if !haveAsmLoop {
		t.Skip("the CPU has no BMI2: no assembly loop")
	}
	ts, recs, _ := loadComplex30000(t)
	recs = recs[:5000]
	decodeAll := func() [][]byte {
		d := mustNew(t, ts)
		var m Message
		out := make([][]byte, len(recs))
		for i, rec := range recs {
			if _, err := d.Decode(rec, &m); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			out[i] = m.AppendJSON(nil)
		}
		return out
	}
	useLoop(t, loopPortable)
	want := decodeAll()
	asmLoopOn = true
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	got := decodeAll()
	close(stop)
	<-done
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d:\n%s\nfastLoop:\n%s", i, got[i], want[i])
		}
	}
}
