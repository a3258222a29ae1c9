package netstackunsafe

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// guarded lists the gVisor declarations this package mirrors, links to or
// relies on, by package directory (relative to the module) and name
// ("func", "(*Recv).method", "type T", "const c"), with the fingerprint of
// their source as the pinned version has it (see fingerprint).
var guarded = []struct {
	dir, name, why, sum string
}{
	{"pkg/tcpip/transport/tcp", "handleConnected", "mirrored by Process", "51de966e3b365cbc"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).handleSegmentsLocked", "mirrored by Process", "ceee92fee2df4c89"},
	{"pkg/tcpip/transport/tcp", "(EndpointState).connected", "mirrored by Connected", "2a1d055af4e3f90a"},
	{"pkg/tcpip/transport/tcp", "const maxSegmentsPerWake", "mirrored by maxSegmentsPerRun", "a0dfbe61188ef3f7"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).UnlockUser", "Unlock relies on it", "050d138f690194a8"},
	{"pkg/tcpip/transport/tcp", "(*processor).start", "TryLock: an endpoint marked owned is not requeued", "1e655704a3cfa6d2"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).LockUser", "Unlock's ownedByUser mark must stay harmless to it", "c63bfc9fb82f7220"},
	{"pkg/tcpip/transport/tcp", "(*dispatcher).queuePacket", "OwnedByUser: queue without waking", "83269ca5a55e19d1"},
	{"pkg/tcpip/transport/tcp", "(*segmentQueue).enqueue", "QueuedBytes: the bound netstack applies, and the segments it admits past it", "6d2a4b831ca97e5f"},
	{"pkg/tcpip/transport/tcp", "(*segment).setOwner", "QueuedBytes: a queued segment is counted in rcvMemUsed", "feca869bfce651cc"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).updateReceiveMemUsed", "QueuedBytes: rcvMemUsed is an atomic add", "6091ac294bbaa5d8"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).handleSegmentLocked", "linked", "3263b3b51489b837"},
	{"pkg/tcpip/transport/tcp", "(*segmentQueue).dequeue", "linked", "258c637dfd8c375e"},
	{"pkg/tcpip/transport/tcp", "(*segmentQueue).empty", "linked", "04501bf31bf977e7"},
	{"pkg/tcpip/transport/tcp", "(*segment).DecRef", "linked", "cdacac27726e439b"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).resetConnectionLocked", "linked", "d577a7d0a7a146a3"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).drainClosingSegmentQueue", "linked", "126c6dfcd6949b16"},
	{"pkg/tcpip/transport/tcp", "startTimeWait", "linked; TimeWaitPoints: it notifies EventHUp holding ep.mu in TIME-WAIT", "fed67f696ff4ea5e"},
	{"pkg/tcpip/transport/tcp", "(*receiver).handleTimeWaitSegment", "mirrored by tickwire's timeWaitTable.answer", "6fb26b9f18bde02a"},
	{"pkg/tcpip/transport/tcp", "(*receiver).consumeSegment", "TimeWaitPoints: it enters TIME-WAIT with RcvNxt one past the peer's FIN", "0342c1ac7aceeb3c"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).resetKeepaliveTimer", "linked", "a655eb4396655f44"},
	{"pkg/tcpip/transport/tcp", "(*sender).sendAck", "linked", "7a3594dedf69342b"},
	{"pkg/tcpip/transport/tcp", "(*Endpoint).selectWindow", "linked", "e27de19ce5e71bf5"},
	{"pkg/tcpip/transport/tcp", "(*receiver).getSendParams", "UpdateWindow: RcvAcc is the right edge advertised, the ACK announces selectWindow's window", "33b92f2b9b815a1b"},
	{"pkg/tcpip/transport/tcp", "handleListen", "linked by ProcessQueued", "ce018a660de685dd"},
	{"pkg/tcpip/transport/tcp", "handleConnecting", "linked by ProcessQueued", "e6483e436fec045e"},
	{"pkg/tcpip/transport/tcp", "handleTimeWait", "linked by ProcessQueued", "d3b2d8446bbbf3b6"},
	{"pkg/tcpip/transport/tcp", "(EndpointState).connecting", "mirrored by ProcessQueued", "05097da69fcb9e05"},
	{"pkg/tcpip", "type MonotonicTime", "Monotonic builds it in place", "75596d6bc4226920"},
	{"pkg/tcpip/transport/tcp", "(*sender).sendData", "KeepCwnd: LastSendTime serves only its idle restart", "c3e18d7439d4d749"},
}

// TestGuard fails when the pinned gVisor's source of a guarded declaration
// differs from the one this package was written against (see the package
// doc for what to do).
func TestGuard(t *testing.T) {
	dir := gvisorDir(t)
	decls := map[string]map[string]string{} // package dir -> name -> fingerprint
	var changed []string
	for _, g := range guarded {
		if decls[g.dir] == nil {
			decls[g.dir] = declarations(t, filepath.Join(dir, g.dir))
		}
		got, ok := decls[g.dir][g.name]
		switch {
		case !ok:
			changed = append(changed, fmt.Sprintf("%s %s (%s): gone", g.dir, g.name, g.why))
		case got != g.sum:
			changed = append(changed, fmt.Sprintf("%s %s (%s): fingerprint %s, want %s", g.dir, g.name, g.why, got, g.sum))
		}
	}
	if len(changed) > 0 {
		t.Errorf("gVisor at %s changed code this package depends on; see the package doc (When TestGuard fails):\n\t%s",
			dir, strings.Join(changed, "\n\t"))
	}
}

// TestAvailable fails when the pinned gVisor's tcp.Endpoint no longer has
// the fields the package reads, which would silently send every segment of
// latency mode back through netstack's processor goroutines.
func TestAvailable(t *testing.T) {
	if !Available() {
		t.Error("tcp.Endpoint fields (ownedByUser, segmentQueue, snd, rcv, route, waiterQueue, rcvMemUsed, MaxSentAck, SndUna, SndNxt, RcvNxt, RcvAcc) not found")
	}
	if !MonotonicAvailable() {
		t.Error("tcpip.MonotonicTime is no longer one int64 of nanoseconds")
	}
}

// gvisorDir returns the directory of the gvisor.dev/gvisor module the build
// uses.
func gvisorDir(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "gvisor.dev/gvisor").Output()
	if err != nil {
		t.Fatalf("go list -m gvisor.dev/gvisor: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("go list -m gvisor.dev/gvisor: no module directory (run go mod download)")
	}
	return dir
}

// declarations fingerprints every top-level declaration of the Go package
// in dir (test files excluded).
func declarations(t *testing.T, dir string) map[string]string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		sum := func(n ast.Node) string {
			return fingerprint(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				m[funcName(d)] = sum(d)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						m["type "+s.Name.Name] = sum(s)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							m[d.Tok.String()+" "+n.Name] = sum(s)
						}
					}
				}
			}
		}
	}
	return m
}

// funcName names d as the guarded table does: "f" or "(*T).m".
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	var b bytes.Buffer
	printer.Fprint(&b, token.NewFileSet(), d.Recv.List[0].Type)
	return "(" + b.String() + ")." + d.Name.Name
}

// fingerprint hashes the tokens of src, a declaration's source, comments
// and layout left out: only a change in the code itself changes it.
func fingerprint(src []byte) string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(src)), src, nil, 0)
	h := sha256.New()
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON {
			continue // inserted at line ends, or written: layout either way
		}
		fmt.Fprintf(h, "%d %s\n", tok, lit)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// TestFingerprint checks that a fingerprint follows the code and ignores
// comments and layout, so that TestGuard neither misses a change nor fails
// on a reworded comment.
func TestFingerprint(t *testing.T) {
	base := fingerprint([]byte("func f() {\n\tx := 1 // one\n\n\treturn\n}"))
	for _, same := range []string{
		"func f() {\n\t// a new comment\n\tx := 1\n\treturn\n}",
		"func f() { x := 1; return }",
	} {
		if got := fingerprint([]byte(same)); got != base {
			t.Errorf("fingerprint(%q) = %s, want %s (only comments or layout differ)", same, got, base)
		}
	}
	for _, other := range []string{
		"func f() {\n\tx := 2\n\treturn\n}",
		"func f() {\n\tx := 1\n}",
		"func g() {\n\tx := 1\n\treturn\n}",
	} {
		if got := fingerprint([]byte(other)); got == base {
			t.Errorf("fingerprint(%q) = %s, the same as the original's", other, got)
		}
	}
}
