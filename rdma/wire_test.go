package rdma

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"github.com/tickwire/tickwire/link/pcap"
)

// ipv4Frame wraps transport (BTH to the end of the pad, no ICRC) in
// Ethernet, IPv4 (identification 0, DF, TTL 64) and UDP headers from src
// to dst and appends the ICRC.
func ipv4Frame(src, dst netip.AddrPort, transport []byte) []byte {
	udpLen := 8 + len(transport) + ICRCSize
	f := make([]byte, 14+20+udpLen)
	copy(f, []byte{2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa, 8, 0})
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
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
	binary.LittleEndian.PutUint32(u[8+len(transport):], icrcFor(new([28]byte), src, dst, transport))
	return f
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

// checkTshark fails the test for a row tshark did not parse as InfiniBand
// over UDP or flagged malformed or with an expert note.
func checkTshark(t *testing.T, rows []tsharkRow) {
	t.Helper()
	for i, r := range rows {
		if !strings.HasSuffix(r.protocol, "ip:udp:infiniband") && !strings.Contains(r.protocol, "ip:udp:infiniband:") {
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
	checkTshark(t, rows)
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
	if err := writeFile(path, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
