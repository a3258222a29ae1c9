//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/kerneltest"
	"golang.org/x/sys/unix"
)

// TestLiveTAP runs live mode on a TAP device in a namespace and has the
// kernel send lines A and B, each with its own losses, to their groups:
// the output is what the pcap mode gives for the same packets, and the run
// ends by itself at the end of the session.
func TestLiveTAP(t *testing.T) {
	kerneltest.RequireRoot(t)
	ns := kerneltest.NewNetns(t, "twf")
	ns.DisableIPv6(t)
	dev := kerneltest.Name("twf")

	// 150 messages: about 150 frames on the two lines, well within the
	// TAP device's queue, so the kernel drops none of them.
	recs, first := feed(rand.New(rand.NewPCG(7, 8)), 150, 0.15, 0.25, 0, groupB, false)

	f := startLive(t, ns, "-tap", dev, "-addr", "10.207.0.2/24", "-host", "10.207.0.1/24",
		"-line", "A="+groupA.String(), "-line", "B="+groupB.String(),
		"-gap-timeout", "2s", "-duration", "2m", "-format", "json")
	ns.MustRun(t, "ip", "route", "add", "224.0.0.0/4", "dev", dev)

	snd := sender(t, ns, net.IPv4(10, 207, 0, 1), "")
	send(t, recs, func(rec) *net.UDPConn { return snd })
	got := f.wait(t)
	want := expected(first, func(int) bool { return false })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v\nstderr:\n%s", got, want, f.log.String())
	}
}

// sender opens a kernel UDP socket in ns on ip, bound to device dev when
// it is not empty: a multicast datagram then leaves by dev.
func sender(t *testing.T, ns *kerneltest.Netns, ip net.IP, dev string) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := ns.Do(func() (err error) {
		if c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: ip}); err != nil || dev == "" {
			return err
		}
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, dev)
		}); err != nil {
			return err
		}
		return serr
	})
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// send sends each record's datagram to its destination by the socket
// which picks.
func send(t *testing.T, recs []rec, which func(rec) *net.UDPConn) {
	t.Helper()
	for _, r := range recs {
		if _, err := which(r).WriteToUDPAddrPort(r.p, r.dst); err != nil {
			t.Fatal(err)
		}
	}
}

// liveFeed is a run of mcastfeed in a namespace.
type liveFeed struct {
	code chan int
	out  bytes.Buffer
	log  syncLog
}

// startLive runs mcastfeed with args in ns and returns once it is ready.
func startLive(t *testing.T, ns *kerneltest.Netns, args ...string) *liveFeed {
	t.Helper()
	f := &liveFeed{code: make(chan int, 1)}
	pr, pw := io.Pipe()
	go func() {
		err := ns.Do(func() error {
			f.code <- run(args, &f.out, pw)
			return nil
		})
		if err != nil {
			f.code <- -1
		}
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		f.log.add(sc.Text())
		if strings.Contains(sc.Text(), "ready") {
			break
		}
	}
	go func() {
		for sc.Scan() {
			f.log.add(sc.Text())
		}
	}()
	return f
}

// wait waits for the run to end with status 0 and returns its output.
func (f *liveFeed) wait(t *testing.T) []map[string]any {
	t.Helper()
	select {
	case c := <-f.code:
		if c != 0 {
			t.Fatalf("exit %d:\n%s", c, f.log.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("mcastfeed did not end:\n%s", f.log.String())
	}
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m)
	}
	return got
}

// syncLog collects lines from one goroutine for another.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIfaceVeth runs -iface on one end of a veth pair, in its own
// namespace, while the kernel in another namespace sends lines A and B to
// their groups; the output is what the pcap mode gives for the packets.
func TestIfaceVeth(t *testing.T) {
	kerneltest.RequireRoot(t)
	rx, tx := kerneltest.NewNetns(t, "twr"), kerneltest.NewNetns(t, "twx")
	rx.DisableIPv6(t)
	tx.DisableIPv6(t)
	rdev, tdev := kerneltest.Name("twr"), kerneltest.Name("twx")
	kerneltest.Veth(t, rx, rdev, tx, tdev)
	rx.MustRun(t, "ip", "addr", "add", "10.208.0.2/24", "dev", rdev)
	rx.MustRun(t, "ip", "link", "set", rdev, "up")
	tx.MustRun(t, "ip", "addr", "add", "10.208.0.1/24", "dev", tdev)
	tx.MustRun(t, "ip", "link", "set", tdev, "up")
	tx.MustRun(t, "ip", "route", "add", "224.0.0.0/4", "dev", tdev)

	recs, first := feed(rand.New(rand.NewPCG(9, 10)), 150, 0.15, 0.25, 0, groupB, false)
	f := startLive(t, rx, "-iface", rdev, "-line", "A="+groupA.String(), "-line", "B="+groupB.String(),
		"-gap-timeout", "2s", "-duration", "2m", "-format", "json")
	snd := sender(t, tx, net.IPv4(10, 208, 0, 1), "")
	send(t, recs, func(rec) *net.UDPConn { return snd })
	got := f.wait(t)
	want := expected(first, func(int) bool { return false })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v\nstderr:\n%s", got, want, f.log.String())
	}
}

// TestIfacePerLine captures lines A and B, sent to the same GROUP:PORT,
// each from its own veth pair (-iface A=... -iface B=...), as a feed's two
// NICs carry them: they are told apart by interface alone. The two
// readers race, so which line wins a message both carry is free; a message
// only B carries must come from B.
func TestIfacePerLine(t *testing.T) {
	kerneltest.RequireRoot(t)
	rx, tx := kerneltest.NewNetns(t, "twr"), kerneltest.NewNetns(t, "twx")
	rx.DisableIPv6(t)
	tx.DisableIPv6(t)
	var rdev, tdev [2]string
	for i := range 2 {
		rdev[i], tdev[i] = kerneltest.Name("twr"), kerneltest.Name("twx")
		kerneltest.Veth(t, rx, rdev[i], tx, tdev[i])
		rx.MustRun(t, "ip", "addr", "add", fmt.Sprintf("10.209.%d.2/24", i), "dev", rdev[i])
		rx.MustRun(t, "ip", "link", "set", rdev[i], "up")
		tx.MustRun(t, "ip", "addr", "add", fmt.Sprintf("10.209.%d.1/24", i), "dev", tdev[i])
		tx.MustRun(t, "ip", "link", "set", tdev[i], "up")
	}

	recs, first := feed(rand.New(rand.NewPCG(11, 12)), 150, 0.15, 0.25, 0, groupA, false)
	f := startLive(t, rx, "-iface", "A="+rdev[0], "-iface", "B="+rdev[1],
		"-line", "A="+groupA.String(), "-line", "B="+groupA.String(),
		"-gap-timeout", "2s", "-duration", "2m", "-format", "json")
	a := sender(t, tx, net.IPv4(10, 209, 0, 1), tdev[0])
	b := sender(t, tx, net.IPv4(10, 209, 1, 1), tdev[1])
	send(t, recs, func(r rec) *net.UDPConn {
		if r.src == srcB {
			return b
		}
		return a
	})
	got := f.wait(t)
	want := expected(first, func(int) bool { return false })
	wins := map[any]int{}
	for i, m := range got {
		if seq, ok := m["seq"].(float64); ok {
			wins[m["line"]]++
			if first[int(seq)] == "B" && m["line"] != "B" {
				t.Errorf("message %v came from line %v; only B carried it", seq, m["line"])
			}
			delete(m, "line")
		}
		if i < len(want) {
			delete(want[i], "line")
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v\nstderr:\n%s", got, want, f.log.String())
	}
	if wins["A"] == 0 || wins["B"] == 0 {
		t.Errorf("wins per line %v: both interfaces should have delivered\nstderr:\n%s", wins, f.log.String())
	}
}
