package tickwire

import (
	"encoding/binary"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// synHeader builds a SYN header with the given options and a valid checksum
// over a fixed pseudo-header sum.
func synHeader(opts []byte) []byte {
	h := make([]byte, header.TCPMinimumSize+len(opts))
	header.TCP(h).Encode(&header.TCPFields{SrcPort: 1, DstPort: 2, DataOffset: uint8(len(h)), Flags: header.TCPFlagSyn})
	copy(h[header.TCPMinimumSize:], opts)
	binary.BigEndian.PutUint16(h[header.TCPChecksumOffset:], ^checksum.Checksum(h, pseudoSum))
	return h
}

const pseudoSum = 0x1234

func checksumOK(h []byte) bool { return checksum.Checksum(h, pseudoSum) == 0xffff }

func TestRewriteSYN(t *testing.T) {
	// Linux's SYN options: MSS 1460, SACK permitted, timestamps, NOP, WS 7.
	linux := []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 7}
	h := synHeader(linux)
	if !rewriteSYN(h, 1408) {
		t.Fatal("no rewrite")
	}
	opts := header.ParseSynOptions(h[header.TCPMinimumSize:], false)
	if opts.MSS != 1408 || opts.TS || !opts.SACKPermitted || opts.WS != 7 {
		t.Errorf("after rewrite: %+v", opts)
	}
	if !checksumOK(h) {
		t.Error("checksum broken by the rewrite")
	}

	// Nothing to do: small MSS, no timestamps.
	h = synHeader([]byte{2, 4, 0x02, 0x18, 1, 1, 1, 0})
	if rewriteSYN(h, 1408) {
		t.Error("rewrote a SYN that needed nothing")
	}
	// A bad checksum stays bad.
	h = synHeader(linux)
	h[header.TCPChecksumOffset] ^= 1
	rewriteSYN(h, 1408)
	if checksumOK(h) {
		t.Error("rewrite repaired a bad checksum")
	}
	// Malformed options are left alone.
	for _, opts := range [][]byte{{8, 12, 0, 0}, {2, 1, 0, 0}, {2, 4, 0xff}, {8}} {
		h = synHeader(opts)
		before := string(h)
		if rewriteSYN(h, 1408) || string(h) != before {
			t.Errorf("options % x: malformed header was changed", opts)
		}
	}
}

// FuzzRewriteSYN feeds arbitrary TCP headers to the SYN option rewriter: it
// must not panic, must keep the header length, must change only the option
// bytes, and must keep a valid checksum valid (and a bad one bad).
func FuzzRewriteSYN(f *testing.F) {
	f.Add(synHeader([]byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 7}), uint16(1408))
	f.Add(synHeader([]byte{2, 4, 0x05, 0x80}), uint16(0))
	f.Add([]byte{0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 2, 0, 0, 0, 0, 0, 0}, uint16(536))
	f.Fuzz(func(t *testing.T, h []byte, maxMSS uint16) {
		valid := len(h) >= header.TCPMinimumSize && checksumOK(h)
		before := append([]byte(nil), h...)
		changed := rewriteSYN(h, maxMSS)
		if len(h) != len(before) {
			t.Fatal("length changed")
		}
		if !changed {
			if string(h) != string(before) {
				t.Fatal("reported no change but changed bytes")
			}
			return
		}
		for i := range header.TCPMinimumSize {
			if i != header.TCPChecksumOffset && i != header.TCPChecksumOffset+1 && h[i] != before[i] {
				t.Fatalf("byte %d of the fixed header changed", i)
			}
		}
		if checksumOK(h) != valid {
			t.Fatalf("checksum validity changed from %v", valid)
		}
		if _, mssOff, _ := synOptions(h); mssOff >= 0 && maxMSS != 0 && binary.BigEndian.Uint16(h[mssOff+2:]) > maxMSS {
			t.Fatal("MSS above the clamp")
		}
	})
}
