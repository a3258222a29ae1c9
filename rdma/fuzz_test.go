package rdma

import (
	"bytes"
	"testing"
)

// FuzzParse checks that Parse never panics and that what it accepts is
// consistent: the views lie inside the input, in order, and re-encoding
// the BTH and RETH reproduces their bytes.
func FuzzParse(f *testing.F) {
	ip := unhex(f, scapyUCSend)
	f.Add(ip[28:])
	b := make([]byte, BTHSize+RETHSize+ImmSize+8+ICRCSize)
	BTH(b).Encode(&BTHFields{Opcode: OpWriteOnlyImm, PadCount: 3, PKey: DefaultPKey, DestQP: 1, PSN: 2})
	f.Add(b)
	ack := make([]byte, BTHSize+AETHSize+ICRCSize)
	BTH(ack).Encode(&BTHFields{Opcode: OpAcknowledge})
	f.Add(ack)
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Packet
		if err := Parse(b, &p); err != nil {
			return
		}
		op := p.BTH.Opcode()
		hl := op.HeaderLen()
		if hl == 0 || len(b) < hl+ICRCSize {
			t.Fatalf("accepted %d bytes for %v", len(b), op)
		}
		n := hl + len(p.Payload) + p.BTH.PadCount() + ICRCSize
		if p.Payload == nil {
			n = hl + ICRCSize
		}
		if n != len(b) {
			t.Fatalf("header %d + payload %d + pad %d + icrc != %d", hl, len(p.Payload), p.BTH.PadCount(), len(b))
		}
		var f BTHFields
		f.Opcode, f.SE, f.Mig, f.PadCount = op, p.BTH.SolicitedEvent(), p.BTH.MigReq(), p.BTH.PadCount()
		f.PKey, f.DestQP, f.AckReq, f.PSN = p.BTH.PKey(), p.BTH.DestQP(), p.BTH.AckReq(), p.BTH.PSN()
		re := make(BTH, BTHSize)
		re.Encode(&f)
		re[4], re[8] = b[4], re[8]|b[8]&0x7f // reserved bits are not encoded
		if !bytes.Equal(re, b[:BTHSize]) {
			t.Fatalf("BTH round trip % x != % x", []byte(re), b[:BTHSize])
		}
		if p.RETH != nil {
			r := make(RETH, RETHSize)
			r.Encode(p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALength())
			if !bytes.Equal(r, p.RETH) {
				t.Fatal("RETH round trip")
			}
		}
		_ = ICRC(make([]byte, 20), append(make([]byte, 8), b[:len(b)-ICRCSize]...))
	})
}
