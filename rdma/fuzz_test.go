package rdma

import (
	"bytes"
	"encoding/binary"
	"net/netip"
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

// FuzzQP feeds packets to a responder and requester in RTS (with a valid
// ICRC and the queue pair's number filled in, so that they get past the
// device's checks): nothing panics or hangs, and nothing is written into a
// region that does not allow remote writes.
func FuzzQP(f *testing.F) {
	p := newPair(f, 256, faults{})
	rw, _ := p.db.RegisterMR(make([]byte, 1024), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	roBytes := bytes.Repeat([]byte{0x5a}, 1024)
	ro, _ := p.db.RegisterMR(roBytes, AccessRemoteRead)
	recv, _ := p.db.RegisterMR(make([]byte, 4096), AccessLocalWrite)
	from := netip.AddrPortFrom(addrA, UDPPort)
	local := netip.AddrPortFrom(addrB, UDPPort)
	q := p.qb
	seed := func(op Opcode, psn uint32, key uint32, va uint64, n uint32, payload int) []byte {
		b := make([]byte, op.HeaderLen()+(payload+3)&^3)
		BTH(b).Encode(&BTHFields{Opcode: op, PKey: DefaultPKey, AckReq: true, PSN: psn, PadCount: (4 - payload%4) % 4})
		if opFlags[op]&fReth != 0 {
			RETH(b[BTHSize:]).Encode(va, key, n)
		}
		return b
	}
	f.Add(seed(OpWriteOnly, 0xfffff0, rw.RKey(), rw.Addr(), 10, 10))
	f.Add(seed(OpWriteOnly, 0xfffff0, ro.RKey(), ro.Addr(), 10, 10))
	f.Add(seed(OpWriteFirst, 0xfffff0, rw.RKey(), rw.Addr()+8, 300, 256))
	f.Add(seed(OpReadRequest, 0xfffff0, ro.RKey(), ro.Addr(), 700, 0))
	f.Add(seed(OpSendOnlyImm, 0xfffff0, 0, 0, 0, 17))
	f.Add(seed(OpAcknowledge, 0xffff00, 0, 0, 0, 0)[:BTHSize])
	var h [icrcScratch]byte
	f.Fuzz(func(t *testing.T, data []byte) {
		if q.State() == StateError {
			q.Destroy()
			var err error
			if q, err = p.db.CreateQP(QPConfig{SendCQ: p.cqb, RecvCQ: p.cqb}); err != nil {
				t.Fatal(err)
			}
			if err := q.Connect(QPAttrs{PeerAddr: addrA, PeerQPN: p.qa.QPN(), RecvPSN: 0xfffff0, SendPSN: 0xfffff0, PathMTU: 256}); err != nil {
				t.Fatal(err)
			}
		}
		_ = q.PostRecv(RecvWR{Local: recv, Length: 4096})
		p.cqb.Poll(make([]Completion, 64))
		b := make([]byte, len(data)+ICRCSize)
		copy(b, data)
		if len(data) >= BTHSize {
			put24(b[BTHDestQPOffset:], q.QPN())
			binary.LittleEndian.PutUint32(b[len(data):], icrcFor(&h, from, local, data))
		}
		p.db.handle(nil, b, from)
		if !bytes.Equal(roBytes, bytes.Repeat([]byte{0x5a}, 1024)) {
			t.Fatal("a region without remote write access changed")
		}
	})
}
