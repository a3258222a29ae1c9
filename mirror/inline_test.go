package mirror

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestHotHelpersInline checks that the helpers HandleFrame's straight path calls
// for every segment still inline: a call would cost more than the work.
func TestHotHelpersInline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package with -gcflags=-m")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goTool, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	for _, fn := range []string{"ipv4HeaderSumOK", "vectorOnesSum", "tcpPseudoConst"} {
		if !regexp.MustCompile(`: can inline ` + fn + `\b`).Match(out) {
			t.Errorf("%s no longer inlines (see go build -gcflags=-m=2 ./mirror)", fn)
		}
	}
}
