package rdma

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/link/pcap/recorder"
	"github.com/tickwire/tickwire/link/pipe"
)

// ipv4Frame wraps transport (BTH to the end of the pad, no ICRC) in
// Ethernet, IPv4 (identification 0, DF, TTL 64) and UDP headers from src
// to dst and appends the ICRC.
func ipv4Frame(src, dst netip.AddrPort, transport []byte) []byte {
	return ipv4FrameID(src, dst, 0, transport)
}

// ipv4FrameID is ipv4Frame with IPv4 identification id, the ICRC computed
// over the headers as built (ICRC).
func ipv4FrameID(src, dst netip.AddrPort, id uint16, transport []byte) []byte {
	udpLen := 8 + len(transport) + ICRCSize
	f := make([]byte, 14+20+udpLen)
	copy(f, []byte{2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa, 8, 0})
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
	binary.BigEndian.PutUint16(ip[4:], id)
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[8], ip[9] = 64, 17
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	u := ip[20:]
	binary.BigEndian.PutUint16(u, src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	copy(u[8:], transport)
	binary.LittleEndian.PutUint32(u[8+len(transport):], ICRC(ip[:20], u[:8+len(transport)]))
	return f
}

// TestICRCWithPeerIPv4ID: a NIC numbers its datagrams (the ConnectX CNP in
// scapy's tests has identification 0x718c), and the ICRC covers the
// identification: a packet with its own identification and a right ICRC is
// taken (here: to an unknown queue pair), one whose ICRC is off is dropped
// as BadICRC.
func TestICRCWithPeerIPv4ID(t *testing.T) {
	a, b := pipe.New(pipe.Options{})
	s, err := tickwire.New(tickwire.Config{Link: b, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xb}, Addr: netip.MustParsePrefix("10.0.0.2/24")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := netip.MustParseAddrPort("10.0.0.1:49152")
	dst := netip.MustParseAddrPort("10.0.0.2:4791")
	tr := make([]byte, BTHSize+8)
	BTH(tr).Encode(&BTHFields{Opcode: OpSendOnly, PKey: DefaultPKey, DestQP: 0x123, PSN: 7})
	good := ipv4FrameID(src, dst, 0x718c, tr)
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	for _, f := range [][]byte{good, bad} {
		if err := a.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for st := d.Stats(); st.RxPackets < 2 && time.Now().Before(deadline); st = d.Stats() {
		time.Sleep(time.Millisecond)
	}
	if st := d.Stats(); st.RxPackets != 2 || st.UnknownQP != 1 || st.BadICRC != 1 {
		t.Fatalf("stats %+v: want 2 packets, 1 to an unknown QP, 1 bad ICRC", st)
	}
}

// tsharkRow is what tshark's InfiniBand dissector reports of a packet.
type tsharkRow struct {
	opcode, psn, qp     int
	va, rkey, dmalen    string
	syndrome, expert    string
	malformed, protocol string
}

// tshark runs tshark on path and returns a row per frame, skipping the
// test when tshark is not installed.
func tshark(t *testing.T, path string) []tsharkRow {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed (apt-get install tshark)")
	}
	args := []string{"-n", "-r", path}
	// The payload is the application's bytes: keep tshark from guessing
	// upper protocols in it (RPC over RDMA, SMB Direct...), whose
	// dissectors call a random payload malformed.
	for _, h := range []string{"smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser",
		"infiniband.eoib", "infiniband_sdp", "fcoib"} {
		args = append(args, "--disable-protocol", h)
	}
	args = append(args, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn", "-e", "infiniband.bth.destqp",
		"-e", "infiniband.reth.va", "-e", "infiniband.reth.r_key", "-e", "infiniband.reth.dmalen",
		"-e", "infiniband.aeth.syndrome", "-e", "_ws.expert", "-e", "_ws.malformed", "-e", "frame.protocols")
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	var rows []tsharkRow
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 10 {
			t.Fatalf("tshark line %q", line)
		}
		var r tsharkRow
		r.opcode, _ = strconv.Atoi(f[0])
		r.psn, _ = strconv.Atoi(f[1])
		qp, _ := strconv.ParseInt(f[2], 0, 64)
		r.qp = int(qp)
		r.va, r.rkey, r.dmalen, r.syndrome, r.expert, r.malformed, r.protocol = f[3], f[4], f[5], f[6], f[7], f[8], f[9]
		rows = append(rows, r)
	}
	return rows
}

// isRoCE reports whether tshark parsed the row as InfiniBand over UDP.
func (r tsharkRow) isRoCE() bool {
	return strings.HasSuffix(r.protocol, "ip:udp:infiniband") || strings.Contains(r.protocol, "ip:udp:infiniband:")
}

// checkTshark fails the test for a row tshark flagged malformed or with an
// expert note, and with allRoCE for one it did not parse as InfiniBand
// over UDP.
func checkTshark(t *testing.T, rows []tsharkRow, allRoCE bool) {
	t.Helper()
	for i, r := range rows {
		if allRoCE && !r.isRoCE() {
			t.Errorf("frame %d: protocols %q", i+1, r.protocol)
		}
		if r.expert != "" || r.malformed != "" {
			t.Errorf("frame %d: expert %q malformed %q", i+1, r.expert, r.malformed)
		}
	}
}

// TestTsharkParsesHeaders writes one packet of each opcode and checks
// that tshark's InfiniBand dissector reads back the fields they carry.
func TestTsharkParsesHeaders(t *testing.T) {
	src := netip.MustParseAddrPort("10.0.0.1:4791")
	dst := netip.MustParseAddrPort("10.0.0.2:4791")
	var frames [][]byte
	for op := Opcode(0); op.Known(); op++ {
		pay := 0
		if opFlags[op]&fPayload != 0 {
			pay = 7
		}
		hl := op.HeaderLen()
		tr := make([]byte, hl+(pay+3)&^3)
		BTH(tr).Encode(&BTHFields{Opcode: op, PadCount: (4 - pay%4) % 4, PKey: DefaultPKey, DestQP: 0x11 + uint32(op), AckReq: op == OpWriteLast, PSN: 1000 + uint32(op)})
		o := BTHSize
		if opFlags[op]&fReth != 0 {
			RETH(tr[o:]).Encode(0x10000+uint64(op), 0x77, 4096)
			o += RETHSize
		}
		if opFlags[op]&fAeth != 0 {
			AETH(tr[o:]).Encode(syndromeACKNoCredits, 5)
		}
		copy(tr[hl:], "payload")
		frames = append(frames, ipv4Frame(src, dst, tr))
	}
	path := filepath.Join(t.TempDir(), "ops.pcap")
	writePcap(t, path, frames)
	rows := tshark(t, path)
	if len(rows) != len(frames) {
		t.Fatalf("tshark read %d frames, wrote %d", len(rows), len(frames))
	}
	checkTshark(t, rows, true)
	for i, r := range rows {
		op := Opcode(i)
		if r.opcode != i || r.psn != 1000+i || r.qp != 0x11+i {
			t.Errorf("%v: tshark opcode %d psn %d qp %#x", op, r.opcode, r.psn, r.qp)
		}
		if opFlags[op]&fReth != 0 && (r.va != fmt.Sprintf("0x%016x", 0x10000+i) || r.rkey != "0x00000077" || r.dmalen != "4096") {
			t.Errorf("%v: tshark RETH va %q rkey %q dmalen %q", op, r.va, r.rkey, r.dmalen)
		}
		if opFlags[op]&fAeth != 0 && r.syndrome == "" {
			t.Errorf("%v: tshark saw no AETH", op)
		}
	}
}

func writePcap(t *testing.T, path string, frames [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcap.NewWriter(&buf, layers.LinkTypeEthernet, pcap.DefaultSnapLen)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if err := w.WriteFrame(int64(i)*1000, f, len(f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTsharkSession records a session between two stacks through
// link/pcap/recorder (WRITEs of one and several packets, with immediate,
// a READ, SENDs, an RNR NAK and a remote access NAK) and checks that
// tshark parses every RoCEv2 packet as InfiniBand, without malformed or
// expert notes, with the opcodes, PSNs, RETHs and AETHs sent.
func TestTsharkSession(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed (apt-get install tshark)")
	}
	path, st := recordSession(t)
	rows := tshark(t, path)
	checkTshark(t, rows, false)
	seen := map[int]int{}
	var roce int
	for _, r := range rows {
		if !r.isRoCE() {
			continue
		}
		roce++
		seen[r.opcode]++
		op := Opcode(r.opcode)
		if opFlags[op]&fReth != 0 && (r.va == "" || r.rkey == "" || r.dmalen == "") {
			t.Errorf("%v without RETH fields", op)
		}
		if opFlags[op]&fAeth != 0 && r.syndrome == "" {
			t.Errorf("%v without AETH", op)
		}
	}
	if uint64(roce) != st.TxPackets+st.RxPackets {
		t.Errorf("tshark saw %d RoCE packets, the device counted %d sent and %d received", roce, st.TxPackets, st.RxPackets)
	}
	for _, op := range []Opcode{OpWriteOnly, OpWriteFirst, OpWriteMiddle, OpWriteLast, OpWriteLastImm, OpReadRequest,
		OpReadResponseFirst, OpReadResponseMid, OpReadResponseLast, OpSendFirst, OpSendLastImm, OpSendOnly, OpAcknowledge} {
		if seen[int(op)] == 0 {
			t.Errorf("tshark saw no %v", op)
		}
	}
	t.Logf("%d RoCE packets, opcodes %v", roce, seen)
}

// recordSession records a session between two stacks through
// link/pcap/recorder: WRITEs of one and several packets, with immediate, a
// READ, SENDs, an RNR NAK and a remote access NAK, PSNs wrapping. It
// returns the file and the recording side's counters.
func recordSession(t *testing.T) (string, Stats) {
	path := filepath.Join(t.TempDir(), "rdma.pcap")
	a, b := pipe.New(pipe.Options{})
	rec, err := recorder.Create(a, path)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := tickwire.New(tickwire.Config{Link: rec, MAC: a.MAC(), Addr: netip.PrefixFrom(addrA, 24)})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.PrefixFrom(addrB, 24)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	da, _ := Open(sa)
	db, _ := Open(sb)
	defer db.Close()
	cqa, _ := NewCQ(64)
	cqb, _ := NewCQ(64)
	qa, _ := da.CreateQP(QPConfig{SendCQ: cqa, RecvCQ: cqa})
	qb, _ := db.CreateQP(QPConfig{SendCQ: cqb, RecvCQ: cqb})
	if err := qa.Connect(QPAttrs{PeerAddr: addrB, PeerQPN: qb.QPN(), RecvPSN: 50, SendPSN: 0xfffffe, PathMTU: 256, Timeout: testTimeout}); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(QPAttrs{PeerAddr: addrA, PeerQPN: qa.QPN(), RecvPSN: 0xfffffe, SendPSN: 50, PathMTU: 256, Timeout: testTimeout, MinRNRTimer: 1}); err != nil {
		t.Fatal(err)
	}
	src, _ := da.RegisterMR(bytes.Repeat([]byte("0123456789abcdef"), 64), AccessLocalWrite)
	rmr, _ := db.RegisterMR(make([]byte, 4096), AccessRemoteWrite|AccessRemoteRead|AccessLocalWrite)
	ops := []SendWR{
		{Op: OpWrite, Length: 10, RemoteAddr: rmr.Addr()},
		{Op: OpWrite, Length: 700, RemoteAddr: rmr.Addr() + 100},
		{Op: OpWriteImm, Length: 600, RemoteAddr: rmr.Addr() + 1000, Imm: 9},
		{Op: OpRead, Length: 600, RemoteAddr: rmr.Addr() + 100, Offset: 1024 - 600},
		{Op: OpSendImm, Length: 300, Imm: 10},
		{Op: OpSend, Length: 5},
	}
	if err := qb.PostRecv(RecvWR{Local: rmr, Offset: 2048, Length: 1024}); err != nil { // the WRITE with immediate's
		t.Fatal(err)
	}
	for i := range ops {
		ops[i].ID, ops[i].Local, ops[i].RKey = uint64(i), src, rmr.RKey()
		if err := qa.PostSend(&ops[i]); err != nil {
			t.Fatal(err)
		}
		if ops[i].Op == OpSendImm {
			// No buffer yet: RNR NAKs until one is posted.
			for deadline := time.Now().Add(30 * time.Second); db.Stats().RNRNAKsSent == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no RNR NAK")
				}
			}
			for range 2 {
				if err := qb.PostRecv(RecvWR{Local: rmr, Offset: 2048, Length: 1024}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if c := wait(t, cqa, 1)[0]; c.Status != StatusSuccess {
			t.Fatalf("%v: %+v", ops[i].Op, c)
		}
	}
	bad := SendWR{ID: 99, Op: OpWrite, Local: src, Length: 8, RemoteAddr: rmr.Addr(), RKey: rmr.RKey() + 1}
	if err := qa.PostSend(&bad); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, cqa, 1)[0]; c.Status != StatusRemoteAccess {
		t.Fatalf("bad rkey: %+v", c)
	}
	// The peer stops first and what it sent is delivered before a's
	// device closes: a packet of b's (a late acknowledgement) arriving
	// after that would be in the recording but in none of a's counters.
	db.Close()
	for deadline := time.Now().Add(10 * time.Second); b.TxBacklog() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	da.Close()
	sa.Close() // closes the recorder: the file is complete
	return path, da.Stats()
}

// scapyICRC is run by TestScapyICRC: for every packet of a capture with a
// RoCE BTH, it rebuilds the packet with scapy computing the ICRC, and
// compares with the ICRC on the wire.
const scapyICRC = `
import sys
from scapy.all import rdpcap, Ether
from scapy.contrib.roce import BTH
n = bad = 0
for p in rdpcap(sys.argv[1]):
    if BTH not in p:
        continue
    n += 1
    want = p[BTH].icrc
    q = p.copy()
    del q[BTH].icrc
    got = Ether(q.build())[BTH].icrc
    if got != want:
        bad += 1
        print("mismatch: wire %#010x, scapy %#010x, opcode %d psn %d" % (want, got, p[BTH].opcode, p[BTH].psn))
print("packets", n, "mismatches", bad)
`

// TestScapyICRC checks the ICRC of every packet of a recorded session
// against scapy's RoCE layer (scapy.contrib.roce), when scapy is installed
// (apt-get install python3-scapy: Debian's goes with /usr/bin/python3).
func TestScapyICRC(t *testing.T) {
	py := ""
	for _, c := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(c, "-c", "import scapy.contrib.roce").Run() == nil {
			py = c
			break
		}
	}
	if py == "" {
		t.Skip("scapy's RoCE layer not installed (apt-get install python3-scapy)")
	}
	path, st := recordSession(t)
	script := filepath.Join(t.TempDir(), "icrc.py")
	if err := os.WriteFile(script, []byte(scapyICRC), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("scapy: %v\n%s", err, out)
	}
	want := fmt.Sprintf("packets %d mismatches 0\n", st.TxPackets+st.RxPackets)
	if !strings.HasSuffix(string(out), want) {
		t.Fatalf("scapy says:\n%s\nwant %q", out, want)
	}
}
