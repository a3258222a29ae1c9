package nicsim

import "testing"

// refTuple is a plain reading of the rules Classify documents: it returns the
// bytes to hash and the hash type, or nil and 0 for a frame that is not
// hashed.
func refTuple(frame []byte) ([]byte, uint32) {
	if len(frame) < 14 {
		return nil, 0
	}
	etherType := int(frame[12])<<8 | int(frame[13])
	ip := frame[14:]
	if etherType == 0x8100 {
		if len(frame) < 18 {
			return nil, 0
		}
		etherType = int(frame[16])<<8 | int(frame[17])
		ip = frame[18:]
	}
	if etherType != 0x0800 || len(ip) < 20 {
		return nil, 0
	}
	version, headerLen := ip[0]>>4, int(ip[0]&0xf)*4
	if version != 4 || headerLen < 20 || headerLen > len(ip) {
		return nil, 0
	}
	tuple := append([]byte(nil), ip[12:20]...)
	moreFragments := ip[6]&0x20 != 0
	fragOffset := int(ip[6]&0x1f)<<8 | int(ip[7])
	if moreFragments || fragOffset != 0 || len(ip) < headerLen+4 {
		return tuple, HashTypeIPv4
	}
	switch ip[9] {
	case 6:
		return append(tuple, ip[headerLen:headerLen+4]...), HashTypeIPv4 | HashTypeTCP
	case 17:
		return append(tuple, ip[headerLen:headerLen+4]...), HashTypeIPv4 | HashTypeUDP
	}
	return tuple, HashTypeIPv4
}

// FuzzClassify checks that Classify never panics and agrees with refTuple
// hashed by the bit-serial reference Toeplitz, under the default key and
// table and under another key and a table that does not map queue 0 first.
// The seed corpus is in testdata/fuzz/FuzzClassify.
func FuzzClassify(f *testing.F) {
	for _, s := range []frameSpec{
		{proto: protoTCP, src: "66.9.149.187", dst: "161.142.100.80", sport: 2794, dport: 1766},
		{vlan: true, proto: protoUDP, src: "10.0.0.1", dst: "10.0.0.2", sport: 53, dport: 40000},
		{proto: protoUDP, src: "10.0.0.1", dst: "10.0.0.2", frag: 0x2000},
		{proto: protoTCP, src: "10.0.0.1", dst: "10.0.0.2", options: 12},
		{proto: 1, src: "10.0.0.1", dst: "10.0.0.2"},
		{etype: 0x0806},
	} {
		f.Add(buildFrame(s))
	}
	var key [RSSKeySize]byte
	for i := range key {
		key[i] = byte(i*151 + 7)
	}
	rsses := []*RSS{
		mustRSS(f, RSSConfig{Queues: 4}),
		mustRSS(f, RSSConfig{Key: key, Queues: 3, Table: []uint16{2, 0, 1, 1, 0, 2, 2, 1}}),
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		tuple, wantType := refTuple(frame)
		for _, r := range rsses {
			hash, hashType, queue := r.Classify(frame)
			if hashType != wantType {
				t.Fatalf("hash type %#x, want %#x", hashType, wantType)
			}
			if wantType == 0 {
				if hash != 0 || queue != 0 {
					t.Fatalf("unhashed frame: hash %#x queue %d, want 0 and 0", hash, queue)
				}
				continue
			}
			key := r.Key()
			if want := slowToeplitz(key[:], tuple); hash != want {
				t.Fatalf("hash %#08x, reference %#08x over % x", hash, want, tuple)
			}
			table := r.Table()
			if want := int(table[hash%uint32(len(table))]); queue != want {
				t.Fatalf("queue %d, want table entry %d", queue, want)
			}
		}
	})
}
