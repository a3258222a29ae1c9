//go:build linux

package tickwire_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/tap"
)

// mcastTAPPeer is udpTAPPeer that also returns the kernel side's device
// name, with a route for multicast through it.
func mcastTAPPeer(tb testing.TB) (*tickwire.Stack, *kerneltest.Netns, string) {
	tb.Helper()
	kerneltest.RequireRoot(tb)
	ns := kerneltest.NewNetns(tb, "twm")
	ns.DisableIPv6(tb)
	dev := kerneltest.Name("twm")
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.New(tap.Config{Name: dev, Host: netip.PrefixFrom(udpTAPKernel, 24)})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	s, err := newStack(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.PrefixFrom(udpTAPStack, 24)})
	if err != nil {
		ep.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	ns.MustRun(tb, "ip", "route", "add", "224.0.0.0/4", "dev", dev)
	return s, ns, dev
}

// startTcpdump captures IGMP on dev in ns, and returns once tcpdump
// listens; wait returns its output (one line per packet) when it has seen
// count packets.
func startTcpdump(t *testing.T, ns *kerneltest.Netns, dev string, count int) (wait func() string) {
	t.Helper()
	kerneltest.RequireTool(t, "tcpdump")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := ns.Command(ctx, "tcpdump", "-i", dev, "-n", "-l", "-v", "-c", strconv.Itoa(count), "igmp")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "listening on") {
			break
		}
	}
	go func() { // drain the rest
		for sc.Scan() {
		}
	}()
	var once sync.Once
	var res string
	wait = func() string {
		once.Do(func() {
			err := cmd.Wait()
			cancel()
			if err != nil {
				t.Errorf("tcpdump: %v (%s)", err, out.String())
			}
			res = out.String()
		})
		return res
	}
	t.Cleanup(func() { cancel(); wait() })
	return wait
}

// TestMulticastKernelTAP has the Linux kernel send to a group that one
// tickwire socket joined and another did not, checks the IGMP report on
// the wire, leaves the group, and has a kernel receiver that joined a group
// get tickwire's multicast sends.
func TestMulticastKernelTAP(t *testing.T) {
	s, ns, dev := mcastTAPPeer(t)
	got := make(chan string, 1024)
	handler := func(name string) tickwire.UDPHandler {
		return func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
			select {
			case got <- name + ":" + string(payload):
			default:
			}
		}
	}
	joined, err := s.ServeUDP(5000, handler("joined"))
	if err != nil {
		t.Fatal(err)
	}
	defer joined.Close()
	other, err := s.ServeUDP(5001, handler("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	// The join sends an IGMP membership report for the group.
	wait := startTcpdump(t, ns, dev, 1)
	if err := joined.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	report := wait()
	t.Logf("tcpdump: %s", report)
	if !strings.Contains(report, "igmp") || !strings.Contains(report, testGroup.String()) {
		t.Errorf("no IGMP report for %v on the wire: %q", testGroup, report)
	}

	var snd *net.UDPConn
	if err := ns.Do(func() (err error) {
		snd, err = net.ListenUDP("udp4", &net.UDPAddr{IP: udpTAPKernel.AsSlice()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	sendTo := func(port int, msg string) {
		t.Helper()
		if _, err := snd.WriteToUDP([]byte(msg), &net.UDPAddr{IP: testGroup.AsSlice(), Port: port}); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-time.After(20 * time.Second):
			t.Fatalf("nothing received; stats %+v", s.Stats())
		}
		return ""
	}
	// In order on the TAP queue: the datagram to the socket that did not
	// join comes first, and must not be seen before the joined one's.
	sendTo(5001, "g1")
	sendTo(5000, "g2")
	if m := next(); m != "joined:g2" {
		t.Errorf("got %q, want joined:g2", m)
	}

	// After the leave the group's datagrams stop; a unicast datagram sent
	// after them marks that they have been processed.
	if err := joined.LeaveGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	sendTo(5000, "g3")
	if _, err := snd.WriteToUDP([]byte("u1"), &net.UDPAddr{IP: udpTAPStack.AsSlice(), Port: 5000}); err != nil {
		t.Fatal(err)
	}
	if m := next(); m != "joined:u1" {
		t.Errorf("got %q after the leave, want joined:u1", m)
	}

	// A kernel receiver that joined a group gets tickwire's sends.
	g2 := netip.MustParseAddr("239.1.2.4")
	var rcv *net.UDPConn
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		rcv, err = net.ListenMulticastUDP("udp4", ifi, &net.UDPAddr{IP: g2.AsSlice(), Port: 6000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	tx, err := s.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if _, err := tx.WriteToUDPAddrPort([]byte("to kernel"), netip.AddrPortFrom(g2, 6000)); err != nil {
		t.Fatal(err)
	}
	rcv.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	n, from, err := rcv.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "to kernel" || from.Addr().Unmap() != udpTAPStack {
		t.Fatalf("kernel read %q from %v: %v", buf[:n], from, err)
	}
}
