//go:build linux && (amd64 || arm64)

package afxdp_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	ebpflink "github.com/cilium/ebpf/link"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/link/afxdp"
)

func TestNoInterface(t *testing.T) {
	_, err := afxdp.New("twx-missing0", afxdp.Config{Addr: stackIP})
	var e *afxdp.Error
	if !errors.Is(err, afxdp.ErrNoInterface) || !errors.As(err, &e) || e.Interface != "twx-missing0" {
		t.Fatalf("New on a missing interface: %v", err)
	}
	_, err = afxdp.NewSource("twx-missing0", afxdp.Config{Filter: afxdp.Filter{Port: 1}})
	if !errors.Is(err, afxdp.ErrNoInterface) {
		t.Fatalf("NewSource on a missing interface: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		source bool
		cfg    afxdp.Config
		field  string
	}{
		{"no address", false, afxdp.Config{}, "Addr"},
		{"IPv6 address", false, afxdp.Config{Addr: netip.MustParseAddr("::1")}, "Addr"},
		{"filter on an endpoint", false, afxdp.Config{Addr: stackIP, Filter: afxdp.Filter{Port: 1}}, "Filter"},
		{"no filter", true, afxdp.Config{}, "Filter"},
		{"IPv6 filter", true, afxdp.Config{Filter: afxdp.Filter{Host: netip.MustParseAddr("::1")}}, "Filter"},
		{"frame size", false, afxdp.Config{Addr: stackIP, FrameSize: 3000}, "FrameSize"},
		{"ring frames", true, afxdp.Config{Filter: afxdp.Filter{Port: 1}, RingFrames: 100}, "RingFrames"},
		{"queues", true, afxdp.Config{Filter: afxdp.Filter{Port: 1}, Queues: 65}, "Queues"},
		{"MAC", false, afxdp.Config{Addr: stackIP, MAC: net.HardwareAddr{1, 2, 3, 4, 5, 6}}, "MAC"},
	} {
		var err error
		if c.source {
			_, err = afxdp.NewSource("lo", c.cfg)
		} else {
			_, err = afxdp.New("lo", c.cfg)
		}
		var ce *afxdp.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v, want a ConfigError for %s", c.name, err, c.field)
		}
	}
}

func TestQueueOutOfRange(t *testing.T) {
	v := newVeth(t)
	_, err := v.open(afxdp.Config{Addr: stackIP, Queue: 1})
	if !errors.Is(err, afxdp.ErrQueueRange) {
		t.Fatalf("queue 1 of a one-queue veth: %v", err)
	}
	t.Log(err)
	_, err = v.open(afxdp.Config{Addr: stackIP, Queues: 2})
	if !errors.Is(err, afxdp.ErrQueueRange) {
		t.Fatalf("queues 0-1 of a one-queue veth: %v", err)
	}
}

// TestNotRoot opens an endpoint from a thread that gave up root: the
// thread's credentials are what the kernel checks, and the thread dies
// with its goroutine (it is never unlocked).
func TestNotRoot(t *testing.T) {
	v := newVeth(t)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(v.own.Path())
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, 65534, 65534, 65534); e != 0 {
			errc <- fmt.Errorf("setresuid: %w", e)
			return
		}
		ep, err := afxdp.New(v.ownDev, afxdp.Config{Addr: stackIP})
		if err == nil {
			ep.Close()
		}
		errc <- err
	}()
	err := <-errc
	if !errors.Is(err, afxdp.ErrPermission) {
		t.Fatalf("New without root: %v, want ErrPermission", err)
	}
	t.Log(err)
}

// passProgram loads an XDP program that passes every frame, named name.
func passProgram(t *testing.T, name string) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.XDP, License: "Apache-2.0",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func (v *vethPair) ifindex(t *testing.T) int {
	t.Helper()
	var idx int
	if err := v.own.Do(func() error {
		ifc, err := net.InterfaceByName(v.ownDev)
		if err == nil {
			idx = ifc.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestProgramAttached: a program someone else attached through netlink is
// refused unless Config.Replace; one a live BPF link holds is refused even
// then; a stale tickwire program is replaced without asking.
func TestProgramAttached(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	v := newVeth(t)
	idx := v.ifindex(t)
	other := passProgram(t, "other_xdp")
	if err := v.own.Do(func() error { return afxdp.AttachNetlink(idx, other.FD()) }); err != nil {
		t.Fatal(err)
	}
	_, err := v.open(afxdp.Config{Addr: stackIP})
	var ae *afxdp.AttachedError
	if !errors.As(err, &ae) || ae.ProgramName != "other_xdp" || ae.Held {
		t.Fatalf("New over a foreign program: %v", err)
	}
	t.Log(err)
	if xdpAttached(t, v.own, v.ownDev) == "" {
		t.Fatal("the foreign program was detached by a refused New")
	}
	ep, err := v.open(afxdp.Config{Addr: stackIP, Replace: true})
	if err != nil {
		t.Fatalf("New with Replace: %v", err)
	}
	ep.Close()
	if a := xdpAttached(t, v.own, v.ownDev); a != "" {
		t.Fatalf("after Close: %s still attached", a)
	}

	// A stale tickwire program (attached the way that outlives a process).
	stale := passProgram(t, afxdp.ProgramPrefix+"xdp")
	if err := v.own.Do(func() error { return afxdp.AttachNetlink(idx, stale.FD()) }); err != nil {
		t.Fatal(err)
	}
	ep, err = v.open(afxdp.Config{Addr: stackIP})
	if err != nil {
		t.Fatalf("New over a stale tickwire program: %v", err)
	}
	ep.Close()
	if a := xdpAttached(t, v.own, v.ownDev); a != "" {
		t.Fatalf("after Close: %s still attached", a)
	}

	// A program held by a live BPF link.
	var l ebpflink.Link
	if err := v.own.Do(func() (err error) {
		l, err = ebpflink.AttachXDP(ebpflink.XDPOptions{Program: other, Interface: idx, Flags: ebpflink.XDPGenericMode})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = v.open(afxdp.Config{Addr: stackIP, Replace: true})
	if !errors.As(err, &ae) || !ae.Held {
		t.Fatalf("New with Replace over a held program: %v", err)
	}
	t.Log(err)
	l.Close()
	goleak.VerifyNone(t, ignore)
}

// TestCloseDetaches opens and closes endpoints over and over: each Close
// detaches the program and releases the sockets (an AF_XDP queue takes
// one socket at a time, so a leaked one would fail the next bind).
func TestCloseDetaches(t *testing.T) {
	v := newVeth(t)
	for i := range 20 {
		ep, err := v.open(afxdp.Config{Addr: stackIP})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		ep.Close()
	}
	if a := xdpAttached(t, v.own, v.ownDev); a != "" {
		t.Fatalf("after Close: %s still attached", a)
	}
}
