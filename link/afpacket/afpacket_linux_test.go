//go:build linux

package afpacket_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/afpacket"
	"github.com/tickwire/tickwire/link/frame"
)

// vethPair creates a network namespace holding a veth pair without
// addresses or IPv6 link-local addresses, so nothing but the frames a test
// injects crosses it. It returns the namespace and the two ends' names.
func vethPair(t *testing.T) (ns *kerneltest.Netns, a, b string) {
	t.Helper()
	ns = kerneltest.NewNetns(t, "twa")
	a, b = "twa0", "twa1"
	ns.MustRun(t, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
	for _, n := range []string{a, b} {
		ns.MustRun(t, "ip", "link", "set", n, "addrgenmode", "none")
		ns.MustRun(t, "ip", "link", "set", n, "up")
	}
	return ns, a, b
}

// openIn opens a Source on an interface of ns.
func openIn(t *testing.T, ns *kerneltest.Netns, iface string, cfg afpacket.Config) *afpacket.Source {
	t.Helper()
	var src *afpacket.Source
	if err := ns.Do(func() (err error) {
		src, err = afpacket.New(iface, cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// injector sends raw Ethernet frames out of an interface.
type injector struct {
	fd int
	sa unix.SockaddrLinklayer
}

func newInjector(t *testing.T, ns *kerneltest.Netns, iface string) *injector {
	t.Helper()
	in := &injector{fd: -1}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		in.sa.Ifindex = ifi.Index
		in.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(in.fd) })
	return in
}

// send sends a frame with EtherType 0x88b5 (local experimental) whose
// payload starts with seq, padded to size bytes.
func (in *injector) send(t *testing.T, seq uint32, size int) {
	t.Helper()
	f := make([]byte, size)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x88b5)
	binary.BigEndian.PutUint32(f[14:], seq)
	if err := unix.Sendto(in.fd, f, 0, &in.sa); err != nil {
		t.Fatal(err)
	}
}

func isInjected(f []byte) bool {
	return len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == 0x88b5
}

func TestNewErrors(t *testing.T) {
	_, err := afpacket.New("twa-no-such", afpacket.Config{})
	var e *afpacket.Error
	if !errors.As(err, &e) || e.Interface != "twa-no-such" || e.Op != "open" {
		t.Fatalf("New(no such interface) = %v, want *afpacket.Error for it", err)
	}
	if !strings.HasPrefix(err.Error(), "afpacket: open twa-no-such: ") {
		t.Errorf("message %q lacks the package prefix and context", err)
	}
	for _, cfg := range []afpacket.Config{
		{FrameSize: 100},
		{FrameSize: 2050},
		{RingFrames: -1},
		{FrameSize: 1 << 20, RingFrames: 4096},
		{ReadTimeout: -time.Second},
	} {
		if _, err := afpacket.New("lo", cfg); err == nil {
			t.Errorf("New(lo, %+v) succeeded, want a config error", cfg)
		}
	}
}

func TestBatchOrderTimestampsAndAllocs(t *testing.T) {
	ns, a, b := vethPair(t)
	src := openIn(t, ns, a, afpacket.Config{RingFrames: 512, ReadTimeout: 2 * time.Second})
	in := newInjector(t, ns, b)

	const total = 300
	start := time.Now()
	for i := range total {
		in.send(t, uint32(i), 60+i%1400)
	}
	batch := frame.NewBatch(64, 2048)
	// Preallocated so that recording frames inside AllocsPerRun does not
	// allocate.
	seen := make([]uint32, 0, 4*total)
	stamps := make([]int64, 0, 4*total)
	maxBatch := 0
	readInjected := func(frames []frame.Frame) {
		n, err := src.ReadFrames(frames)
		if err != nil {
			t.Fatalf("ReadFrames after %d frames: %v", len(seen), err)
		}
		maxBatch = max(maxBatch, n)
		for _, f := range frames[:n] {
			if !isInjected(f.Data()) {
				continue
			}
			seen = append(seen, binary.BigEndian.Uint32(f.Data()[14:]))
			stamps = append(stamps, f.Time)
			if want := 60 + int(seen[len(seen)-1])%1400; f.N != want || f.WireLen != want {
				t.Fatalf("frame %d: N %d WireLen %d, want %d", seen[len(seen)-1], f.N, f.WireLen, want)
			}
		}
	}
	for len(seen) < 100 {
		readInjected(batch)
	}
	// The rest are already in the ring: reading them one at a time must
	// not allocate.
	time.Sleep(50 * time.Millisecond)
	allocs := testing.AllocsPerRun(100, func() { readInjected(batch[:1]) })
	if allocs != 0 {
		t.Errorf("ReadFrames: %v allocs per call, want 0", allocs)
	}
	for len(seen) < total {
		readInjected(batch)
	}
	if maxBatch < 2 {
		t.Errorf("largest batch %d: frames already in the ring were not batched", maxBatch)
	}
	for i, s := range seen {
		if s != uint32(i) {
			t.Fatalf("frame %d carries sequence %d: order lost", i, s)
		}
	}
	var subMicro bool
	for i, ts := range stamps {
		if ts < start.Add(-time.Second).UnixNano() || ts > time.Now().UnixNano() {
			t.Fatalf("frame %d timestamp %v outside the test's run", i, time.Unix(0, ts))
		}
		if i > 0 && ts < stamps[i-1] {
			t.Fatalf("frame %d timestamp goes back in time", i)
		}
		subMicro = subMicro || ts%1000 != 0
	}
	if !subMicro {
		t.Error("all timestamps are whole microseconds: nanosecond resolution lost")
	}
	st := src.Stats()
	if st.Frames < total || st.Truncated != 0 {
		t.Errorf("Stats = %+v, want Frames >= %d and no truncation", st, total)
	}
}

func TestTruncationCounted(t *testing.T) {
	ns, a, b := vethPair(t)
	src := openIn(t, ns, a, afpacket.Config{RingFrames: 64, ReadTimeout: 2 * time.Second})
	newInjector(t, ns, b).send(t, 7, 1000)
	batch := frame.NewBatch(1, 100) // smaller than the frame
	for {
		n, err := src.ReadFrames(batch)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 && isInjected(batch[0].Data()) {
			break
		}
	}
	if f := batch[0]; f.N != 100 || f.WireLen != 1000 || !f.Truncated() {
		t.Errorf("N %d WireLen %d, want 100 of 1000", f.N, f.WireLen)
	}
	if st := src.Stats(); st.Truncated != 1 {
		t.Errorf("Stats.Truncated = %d, want 1", st.Truncated)
	}
}

func TestReadTimeoutAndClose(t *testing.T) {
	ns, a, _ := vethPair(t)
	src := openIn(t, ns, a, afpacket.Config{RingFrames: 64, ReadTimeout: 20 * time.Millisecond})
	batch := frame.NewBatch(4, 2048)
	if n, err := src.ReadFrames(batch); n != 0 || err != afpacket.ErrTimeout {
		t.Fatalf("ReadFrames on a silent link = %d, %v; want 0, ErrTimeout", n, err)
	}
	src.Close()
	if n, err := src.ReadFrames(batch); n != 0 || err != io.EOF {
		t.Fatalf("ReadFrames after Close = %d, %v; want 0, io.EOF", n, err)
	}

	// Without a timeout, a blocked ReadFrames returns io.EOF when another
	// goroutine calls Close.
	src = openIn(t, ns, a, afpacket.Config{RingFrames: 64})
	done := make(chan error, 1)
	go func() {
		_, err := src.ReadFrames(batch)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("blocked ReadFrames returned %v after Close, want io.EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a blocked ReadFrames")
	}
	if err := src.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_ = src.Stats() // safe after Close
}

// serverClient creates two namespaces joined by a veth pair, 10.0.0.1/30 in
// the server one (where the test captures) and 10.0.0.2/30 in the client one.
// Offloads that would merge segments into super-frames are turned off
// (gso_max_segs 1), as a switch's mirror port delivers wire segments.
func serverClient(t *testing.T) (server, client *kerneltest.Netns, serverIf string, serverIP net.IP) {
	t.Helper()
	server, client = kerneltest.NewNetns(t, "twa"), kerneltest.NewNetns(t, "twa")
	serverIf = "twas"
	server.MustRun(t, "ip", "link", "add", serverIf, "gso_max_segs", "1", "type", "veth",
		"peer", "name", "twac", "netns", client.Name, "gso_max_segs", "1")
	server.MustRun(t, "ip", "addr", "add", "10.0.0.1/30", "dev", serverIf)
	server.MustRun(t, "ip", "link", "set", serverIf, "up")
	client.MustRun(t, "ip", "addr", "add", "10.0.0.2/30", "dev", "twac")
	client.MustRun(t, "ip", "link", "set", "twac", "up")
	return server, client, serverIf, net.IPv4(10, 0, 0, 1).To4()
}

// TestLiveCapture sends real kernel TCP traffic from one namespace to a
// listener in another and checks that the captured segments carry
// exactly the bytes sent.
func TestLiveCapture(t *testing.T) {
	server, client, serverIf, serverIP := serverClient(t)
	src := openIn(t, server, serverIf, afpacket.Config{ReadTimeout: 50 * time.Millisecond})

	var ln net.Listener
	if err := server.Do(func() (err error) {
		ln, err = net.Listen("tcp4", serverIP.String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)

	// Capture until told to stop and the ring is drained (a read timed
	// out), keeping a copy of every frame.
	var captured [][]byte
	stop := make(chan struct{})
	capDone := make(chan error, 1)
	go func() {
		batch := frame.NewBatch(32, 2048)
		stopping := false
		for {
			n, err := src.ReadFrames(batch)
			for _, f := range batch[:n] {
				if f.Truncated() {
					capDone <- fmt.Errorf("frame of %d bytes truncated to %d", f.WireLen, f.N)
					return
				}
				captured = append(captured, bytes.Clone(f.Data()))
			}
			select {
			case <-stop:
				stopping = true
			default:
			}
			switch {
			case err == afpacket.ErrTimeout && stopping:
				capDone <- nil
				return
			case err != nil && err != afpacket.ErrTimeout:
				capDone <- err
				return
			}
		}
	}()

	sent := make([]byte, 300_000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range sent {
		sent[i] = byte(rng.Uint32())
	}
	received := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		received <- b
	}()
	err := client.Do(func() error {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort(serverIP.String(), fmt.Sprint(port)), 5*time.Second)
		if err != nil {
			return err
		}
		for off := 0; off < len(sent); off += 7000 {
			if _, err := c.Write(sent[off:min(off+7000, len(sent))]); err != nil {
				return err
			}
		}
		return c.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-received:
		if !bytes.Equal(got, sent) {
			t.Fatalf("listener received %d bytes, want the %d sent", len(got), len(sent))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not receive the data")
	}
	time.Sleep(100 * time.Millisecond) // let the last ACKs and FINs reach the ring
	close(stop)
	if err := <-capDone; err != nil {
		t.Fatal(err)
	}

	stream, segments := clientStream(t, captured, port)
	if !bytes.Equal(stream, sent) {
		t.Fatalf("captured stream: %d bytes, want the %d sent (first difference at %d)", len(stream), len(sent), firstDiff(stream, sent))
	}
	if segments < len(sent)/1500 {
		t.Errorf("%d data segments for %d bytes: super-frames, not wire segments", segments, len(sent))
	}
	t.Logf("captured %d frames, %d client data segments", len(captured), segments)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// clientStream rebuilds the bytes sent to port from the captured frames
// (untagged Ethernet, IPv4, TCP), placing each payload at its offset from
// the client's SYN.
func clientStream(t *testing.T, frames [][]byte, port uint16) (stream []byte, segments int) {
	t.Helper()
	var isn uint32
	haveSYN := false
	type seg struct {
		seq  uint32
		data []byte
	}
	var segs []seg
	for _, f := range frames {
		if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
			continue
		}
		ip := f[14:]
		ihl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if ip[9] != 6 || total > len(ip) || ihl < 20 || total < ihl+20 {
			continue
		}
		tcp := ip[ihl:total]
		if binary.BigEndian.Uint16(tcp[2:]) != port {
			continue
		}
		seq := binary.BigEndian.Uint32(tcp[4:])
		flags := tcp[13]
		if flags&0x02 != 0 { // SYN
			isn, haveSYN = seq, true
			continue
		}
		payload := tcp[int(tcp[12]>>4)*4:]
		if len(payload) > 0 {
			segs = append(segs, seg{seq, payload})
		}
	}
	if !haveSYN {
		t.Fatal("client SYN not captured")
	}
	for _, s := range segs {
		off := int(s.seq - isn - 1)
		if end := off + len(s.data); end > len(stream) {
			stream = append(stream, make([]byte, end-len(stream))...)
		}
		copy(stream[off:], s.data)
	}
	return stream, len(segs)
}

// The kernel moves an 802.1Q tag out of the frame into the ring slot's
// metadata; KeepVLANTags puts it back.
func TestVLANTags(t *testing.T) {
	for _, keep := range []bool{false, true} {
		ns, a, b := vethPair(t)
		src := openIn(t, ns, a, afpacket.Config{RingFrames: 64, ReadTimeout: 2 * time.Second, KeepVLANTags: keep})
		in := newInjector(t, ns, b)
		f := make([]byte, 64)
		copy(f[0:12], []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1})
		binary.BigEndian.PutUint16(f[12:], 0x8100)
		binary.BigEndian.PutUint16(f[14:], 42)
		binary.BigEndian.PutUint16(f[16:], 0x88b5)
		if err := unix.Sendto(in.fd, f, 0, &in.sa); err != nil {
			t.Fatal(err)
		}
		batch := frame.NewBatch(1, 2048)
		for {
			n, err := src.ReadFrames(batch)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				continue
			}
			d := batch[0].Data()
			if binary.BigEndian.Uint16(d[12:]) == 0x88b5 || binary.BigEndian.Uint16(d[12:]) == 0x8100 {
				tagged := binary.BigEndian.Uint16(d[12:]) == 0x8100
				if tagged != keep || (tagged && binary.BigEndian.Uint16(d[14:])&0xfff != 42) {
					t.Errorf("KeepVLANTags %v: frame starts % x", keep, d[:18])
				}
				break
			}
		}
	}
}

// A ring nobody reads fills up; the kernel's drops are reported.
func TestKernelDropsCounted(t *testing.T) {
	ns, a, b := vethPair(t)
	src := openIn(t, ns, a, afpacket.Config{RingFrames: 64, ReadTimeout: time.Second})
	in := newInjector(t, ns, b)
	for i := range 500 {
		in.send(t, uint32(i), 100)
	}
	time.Sleep(100 * time.Millisecond)
	st := src.Stats()
	if st.KernelDrops == 0 {
		t.Fatalf("Stats = %+v: 500 frames into a 64-slot ring dropped none", st)
	}
	// The ring still works after overflowing.
	batch := frame.NewBatch(64, 2048)
	if n, err := src.ReadFrames(batch); n == 0 || err != nil {
		t.Fatalf("ReadFrames after overflow = %d, %v", n, err)
	}
	t.Logf("%+v", src.Stats())
}

// BenchmarkReadFrames measures reading frames that are already in the ring
// (the injection of each batch is outside the timer).
func BenchmarkReadFrames(b *testing.B) {
	kerneltest.RequireRoot(b)
	ns := kerneltest.NewNetns(b, "twa")
	ns.MustRun(b, "ip", "link", "add", "twa0", "type", "veth", "peer", "name", "twa1")
	for _, n := range []string{"twa0", "twa1"} {
		ns.MustRun(b, "ip", "link", "set", n, "addrgenmode", "none")
		ns.MustRun(b, "ip", "link", "set", n, "up")
	}
	var src *afpacket.Source
	var fd int
	var sa unix.SockaddrLinklayer
	if err := ns.Do(func() (err error) {
		if src, err = afpacket.New("twa0", afpacket.Config{ReadTimeout: time.Second}); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("twa1")
		if err != nil {
			return err
		}
		sa.Ifindex = ifi.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	defer unix.Close(fd)
	const perBatch = 64
	pkt := make([]byte, 1408+54)
	copy(pkt, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5})
	batch := frame.NewBatch(perBatch, 2048)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)) * perBatch)
	for b.Loop() {
		b.StopTimer()
		for range perBatch {
			if err := unix.Sendto(fd, pkt, 0, &sa); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for got := 0; got < perBatch; {
			n, err := src.ReadFrames(batch[:perBatch-got])
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBatch), "ns/frame")
}
