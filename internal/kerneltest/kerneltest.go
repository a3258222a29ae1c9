//go:build linux

package kerneltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireRoot skips the test unless it runs as root, which creating
// namespaces and devices needs.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("kerneltest: needs root (CAP_NET_ADMIN) to create network namespaces and devices; skipping")
	}
}

// RequireTool skips the test when the named program is not installed and
// returns its path.
func RequireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Skipf("kerneltest: %s not installed; skipping", name)
	}
	return p
}

// Name returns prefix followed by a short random suffix, at most 15 bytes
// (IFNAMSIZ-1), for a device or namespace that will not collide with one
// of another test or helper.
func Name(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	n := prefix + hex.EncodeToString(b[:])
	if len(n) > 15 {
		n = n[:15]
	}
	return n
}

// Netns is a named network namespace created by NewNetns.
type Netns struct {
	// Name is the namespace's name, as `ip netns` knows it.
	Name string
}

// NewNetns creates a network namespace named prefix-<random> with its
// loopback up, and deletes it (with every device still inside) in
// t.Cleanup. It skips the test when not root or when ip is absent.
func NewNetns(tb testing.TB, prefix string) *Netns {
	tb.Helper()
	RequireRoot(tb)
	RequireTool(tb, "ip")
	ns := &Netns{Name: Name(prefix + "-")}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		tb.Fatalf("kerneltest: ip netns add %s: %v: %s", ns.Name, err, out)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", ns.Name).CombinedOutput(); err != nil {
			tb.Errorf("kerneltest: ip netns delete %s: %v: %s", ns.Name, err, out)
		}
	})
	ns.MustRun(tb, "ip", "link", "set", "lo", "up")
	return ns
}

// DisableIPv6 turns IPv6 off for devices created in n from now on, so that
// router solicitations and MLD reports do not mix with a test's frames.
func (n *Netns) DisableIPv6(tb testing.TB) {
	tb.Helper()
	n.MustRun(tb, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1")
}

// Path returns the namespace's file, usable with unix.Setns.
func (n *Netns) Path() string { return filepath.Join("/run/netns", n.Name) }

// Command returns a command that runs inside the namespace.
func (n *Netns) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its combined output.
func (n *Netns) Run(name string, args ...string) ([]byte, error) {
	out, err := n.Command(context.Background(), name, args...).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("kerneltest: %s %s in %s: %w: %s", name, strings.Join(args, " "), n.Name, err, out)
	}
	return out, err
}

// MustRun is Run that fails the test on error.
func (n *Netns) MustRun(tb testing.TB, name string, args ...string) []byte {
	tb.Helper()
	out, err := n.Run(name, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// MoveLink moves device dev into n, from namespace from (nil: the
// caller's namespace).
func (n *Netns) MoveLink(tb testing.TB, from *Netns, dev string) {
	tb.Helper()
	args := []string{"link", "set", "dev", dev, "netns", n.Name}
	if from != nil {
		args = append([]string{"-n", from.Name}, args...)
	}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("kerneltest: move %s into %s: %v: %s", dev, n.Name, err, out)
	}
}

// Veth creates a veth pair with one end, nameA, in a and the other, nameB,
// in b, both up. Namespaces delete their devices when they go.
func Veth(tb testing.TB, a *Netns, nameA string, b *Netns, nameB string) {
	tb.Helper()
	VethQueues(tb, a, nameA, b, nameB, 1)
}

// VethQueues is Veth with queues receive and transmit queues on each end.
func VethQueues(tb testing.TB, a *Netns, nameA string, b *Netns, nameB string, queues int) {
	tb.Helper()
	q := strconv.Itoa(queues)
	a.MustRun(tb, "ip", "link", "add", nameA, "numtxqueues", q, "numrxqueues", q, "type", "veth",
		"peer", "name", nameB, "numtxqueues", q, "numrxqueues", q)
	b.MoveLink(tb, a, nameB)
	a.MustRun(tb, "ip", "link", "set", nameA, "up")
	b.MustRun(tb, "ip", "link", "set", nameB, "up")
}

// Do runs fn on an OS thread switched into the namespace, then switches the
// thread back. Sockets, devices and netlink requests that fn creates belong
// to the namespace and stay usable from any goroutine afterwards. fn must
// not start goroutines that expect to run inside the namespace: they run
// on other threads.
func (n *Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	// A fresh goroutine: if switching back fails, it exits with its thread
	// still locked, and the runtime discards the thread.
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("kerneltest: open own netns: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(n.Path())
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("kerneltest: open netns %s: %w", n.Name, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("kerneltest: setns %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("kerneltest: setns back from %s: %w (after fn: %v)", n.Name, err, ferr)
			return // thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
