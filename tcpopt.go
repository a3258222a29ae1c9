package tickwire

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// synOptions locates the options tickwire rewrites in a TCP SYN header (the
// whole header, options included): the offset of a timestamps option and of
// an MSS option, -1 when absent. ok is false when the header or its options
// are malformed; tickwire then leaves the segment to netstack untouched.
func synOptions(tcp []byte) (tsOff, mssOff int, ok bool) {
	tsOff, mssOff = -1, -1
	if len(tcp) < header.TCPMinimumSize {
		return tsOff, mssOff, false
	}
	dataOff := int(tcp[header.TCPDataOffset]>>4) * 4
	if dataOff < header.TCPMinimumSize || dataOff > len(tcp) {
		return tsOff, mssOff, false
	}
	for i := header.TCPMinimumSize; i < dataOff; {
		switch kind := tcp[i]; kind {
		case header.TCPOptionEOL:
			return tsOff, mssOff, true
		case header.TCPOptionNOP:
			i++
			continue
		default:
			if i+1 >= dataOff {
				return tsOff, mssOff, false
			}
			l := int(tcp[i+1])
			if l < 2 || i+l > dataOff {
				return tsOff, mssOff, false
			}
			switch {
			case kind == header.TCPOptionTS && l == header.TCPOptionTSLength:
				tsOff = i
			case kind == header.TCPOptionMSS && l == header.TCPOptionMSSLength:
				mssOff = i
			}
			i += l
		}
	}
	return tsOff, mssOff, true
}

// synNeedsRewrite reports whether rewriteSYN would change tcp.
func synNeedsRewrite(tcp []byte, maxMSS uint16) bool {
	tsOff, mssOff, ok := synOptions(tcp)
	if !ok {
		return false
	}
	return tsOff >= 0 || (mssOff >= 0 && maxMSS != 0 && binary.BigEndian.Uint16(tcp[mssOff+2:]) > maxMSS)
}

// rewriteSYN edits the options of a TCP SYN header in place: it overwrites a
// timestamps option with NOPs, so the connection never carries 12 bytes of
// timestamps per segment, and lowers an MSS option above maxMSS to maxMSS
// (0: leave it). It patches the checksum incrementally (RFC 1624), so a
// segment with a bad checksum stays bad. It reports whether it changed tcp;
// a header with malformed options is left alone.
func rewriteSYN(tcp []byte, maxMSS uint16) bool {
	tsOff, mssOff, ok := synOptions(tcp)
	if !ok {
		return false
	}
	clamp := mssOff >= 0 && maxMSS != 0 && binary.BigEndian.Uint16(tcp[mssOff+2:]) > maxMSS
	if tsOff < 0 && !clamp {
		return false
	}
	// The options start at offset 20, so 16-bit words stay aligned as in the
	// full checksum.
	opts := tcp[header.TCPMinimumSize : int(tcp[header.TCPDataOffset]>>4)*4]
	before := checksum.Checksum(opts, 0)
	if tsOff >= 0 {
		for i := tsOff; i < tsOff+header.TCPOptionTSLength; i++ {
			tcp[i] = header.TCPOptionNOP
		}
	}
	if clamp {
		binary.BigEndian.PutUint16(tcp[mssOff+2:], maxMSS)
	}
	after := checksum.Checksum(opts, 0)
	old := binary.BigEndian.Uint16(tcp[header.TCPChecksumOffset:])
	sum := checksum.Combine(checksum.Combine(^old, ^before), after)
	binary.BigEndian.PutUint16(tcp[header.TCPChecksumOffset:], ^sum)
	return true
}
