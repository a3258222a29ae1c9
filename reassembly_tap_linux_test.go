//go:build linux

package tickwire_test

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// TestReassemblyKernelTAP has the Linux kernel send fragments over TAP: a
// raw socket floods the stack with 64 incomplete datagrams of 44
// fragments of 1480 bytes (5.2 MiB if all were held), then a kernel UDP
// socket sends a 4000-byte datagram, which the kernel fragments. The
// stack holds at most 1 MiB, counts every datagram it could not keep, and
// still receives the last one.
func TestReassemblyKernelTAP(t *testing.T) {
	s, ns := udpTAPPeer(t, tickwire.Config{})
	pc, err := s.ListenUDP(4000)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var fd int
	if err := ns.Do(func() (err error) {
		fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW) // IP_HDRINCL
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	to := &syscall.SockaddrInet4{Addr: udpTAPStack.As4()}

	const datagrams, fragments = 64, 44
	junk := randomBytes(1480, 5)
	rx := s.Stats().IPv4RxPackets
	for id := range uint16(datagrams) {
		for i := range fragments {
			// The kernel fills in the checksum, and replaces an ID of 0.
			ip := ipv4Fragment(udpTAPKernel, udpTAPStack, junkProtocol, id+1, i*1480, true, junk)
			if err := syscall.Sendto(fd, ip, 0, to); err != nil {
				t.Fatalf("sendto: %v", err)
			}
		}
		// One datagram at a time, so that the TAP queue drops none.
		rx += fragments
		settled(func() bool { return s.Stats().IPv4RxPackets >= rx })
	}
	st := s.Stats()
	held, mem := tickwire.FragHeld(s)
	t.Logf("after %d incomplete datagrams: %d held (%d bytes), %d evicted", datagrams, held, mem, st.DropIPv4FragEvicted)
	if st.IPv4RxPackets < rx {
		t.Fatalf("received %d IPv4 packets, want at least %d", st.IPv4RxPackets, rx)
	}
	if mem > tickwire.FragMemory || held+int(st.DropIPv4FragEvicted) != datagrams || st.DropIPv4FragEvicted == 0 {
		t.Errorf("%d datagrams held (%d bytes) and %d evicted; want %d in all, within %d bytes",
			held, mem, st.DropIPv4FragEvicted, datagrams, tickwire.FragMemory)
	}

	c := kernelUDP(t, ns, 4000)
	big := randomBytes(4000, 6)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8192)
	n, _, err := pc.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("read %d bytes, %v; want the %d the kernel sent", n, err, len(big))
	}
	if st := s.Stats(); st.IPv4Reassembled != 1 || st.DropIPv4Malformed != 0 {
		t.Errorf("IPv4Reassembled %d, DropIPv4Malformed %d; want 1, 0", st.IPv4Reassembled, st.DropIPv4Malformed)
	}
}
