//go:build linux

package tickwire_test

import (
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
)

// TestTimeWaitKernelPeer: the Linux kernel, in a namespace behind the
// stack's TAP device, is the server of a connection the stack closes
// first; iptables drops the stack's final ACK, so the kernel, in
// LAST-ACK, retransmits its FIN. The stack's TIME-WAIT record, which
// replaced the netstack endpoint, must answer it with an ACK, not a RST
// (what netstack does for a tuple it has forgotten): the kernel's socket
// then closes cleanly, and no RST from the stack reaches the kernel.
func TestTimeWaitKernelPeer(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.RequireTool(t, "iptables")
	kerneltest.RequireTool(t, "ss")
	s, ns, stackIP := tapPeer(t, tickwire.Config{})
	server := netip.MustParseAddrPort("10.205.0.1:7000")
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp4", server.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sawEOF, closeNow := make(chan struct{}), make(chan struct{})
	closed := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(sawEOF)
			closed <- err
			return
		}
		io.Copy(io.Discard, c) // until the stack's FIN
		close(sawEOF)
		<-closeNow
		closed <- c.Close()
	}()

	c, err := s.DialTCP(ctxTimeout(t, 5*time.Second), server)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	sport := strconv.Itoa(c.LocalAddr().(*net.TCPAddr).Port)
	// Counted, not dropped: RSTs from the stack for the connection.
	ns.MustRun(t, "iptables", "-I", "INPUT", "-p", "tcp", "-s", stackIP.String(), "--sport", sport,
		"--tcp-flags", "RST", "RST", "-j", "ACCEPT")
	// Dropped: the stack's pure ACKs (its FIN carries FIN and ACK, and passes).
	drop := []string{"INPUT", "-p", "tcp", "-s", stackIP.String(), "--sport", sport, "--tcp-flags", "ALL", "ACK", "-j", "DROP"}
	ns.MustRun(t, "iptables", append([]string{"-I"}, drop...)...)
	dropping := true
	defer func() {
		if dropping {
			ns.Run("iptables", append([]string{"-D"}, drop...)...)
		}
	}()

	c.Close()
	select {
	case <-sawEOF:
	case <-time.After(10 * time.Second):
		t.Fatal("the kernel did not see the stack's FIN")
	}
	close(closeNow)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return s.Stats().TCPTimeWait == 1 }) {
		t.Fatalf("TCPTimeWait = %d, want 1", s.Stats().TCPTimeWait)
	}
	if !waitFor(5*time.Second, func() bool { return ruleCount(t, ns, "DROP") > 0 }) {
		t.Fatal("iptables dropped none of the stack's ACKs")
	}
	lastAck := func() bool {
		out := strings.TrimSpace(string(ns.MustRun(t, "ss", "-Htan", "state", "last-ack", "sport", "= :7000")))
		return out != ""
	}
	// Checked while the ACKs are still dropped: once the rule goes, the
	// kernel's next retransmitted FIN may be answered before ss runs.
	if !lastAck() {
		t.Fatal("the kernel's socket is not in LAST-ACK while its ACKs are dropped")
	}
	ns.MustRun(t, "iptables", append([]string{"-D"}, drop...)...)
	dropping = false
	start := time.Now()
	if !waitFor(20*time.Second, func() bool { return !lastAck() }) {
		t.Fatalf("the kernel's socket is still in LAST-ACK %v after the drop ended", time.Since(start))
	}
	t.Logf("the kernel's retransmitted FIN was acknowledged %v after the drop ended", time.Since(start))
	if n := ruleCount(t, ns, "ACCEPT"); n != 0 {
		t.Errorf("the kernel received %d RSTs from the stack, want 0", n)
	}
	if st := s.Stats(); st.TCPResetsTx != 0 || st.TCPTimeWait != 1 {
		t.Errorf("stack: %d RSTs sent, %d connections in TIME-WAIT; want 0 and 1", st.TCPResetsTx, st.TCPTimeWait)
	}
}

// ruleCount returns the packet count of the namespace's INPUT rule with
// the given target (one rule each in TestTimeWaitKernelPeer).
func ruleCount(t *testing.T, ns *kerneltest.Netns, target string) int {
	t.Helper()
	for _, line := range strings.Split(string(ns.MustRun(t, "iptables", "-L", "INPUT", "-v", "-x", "-n")), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == target {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("iptables: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("iptables: no %s rule in INPUT", target)
	return 0
}
