//go:build linux

package kerneltest

import (
	"os"
	"strings"
	"testing"
)

func TestNetnsIsolatesAndCleansUp(t *testing.T) {
	var name string
	t.Run("create", func(t *testing.T) {
		ns := NewNetns(t, "twl")
		name = ns.Name
		if !strings.HasPrefix(ns.Name, "twl-") || len(ns.Name) > 15 {
			t.Fatalf("name %q", ns.Name)
		}
		own, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		var inside string
		if err := ns.Do(func() error {
			var err error
			inside, err = os.Readlink("/proc/thread-self/ns/net")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if inside == own {
			t.Fatalf("Do ran in the caller's namespace %s", own)
		}
		out := ns.MustRun(t, "ip", "-o", "link", "show")
		if lines := strings.Count(string(out), "\n"); lines != 1 || !strings.Contains(string(out), "lo:") {
			t.Fatalf("a fresh namespace should hold only lo:\n%s", out)
		}
	})
	if name == "" {
		return // skipped
	}
	if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
		t.Fatalf("namespace %s not removed: %v", name, err)
	}
}

func TestVethBetweenNamespaces(t *testing.T) {
	RequireTool(t, "ping")
	a, b := NewNetns(t, "twl"), NewNetns(t, "twl")
	va, vb := Name("twl"), Name("twl")
	Veth(t, a, va, b, vb)
	a.MustRun(t, "ip", "addr", "add", "10.201.99.1/24", "dev", va)
	b.MustRun(t, "ip", "addr", "add", "10.201.99.2/24", "dev", vb)
	a.MustRun(t, "ping", "-c", "1", "-W", "2", "10.201.99.2")
	if _, err := a.Run("ip", "link", "show", "dev", vb); err == nil {
		t.Fatalf("%s still in the first namespace", vb)
	}
}
