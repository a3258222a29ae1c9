package mirror

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Flow direction states.
const (
	flowIdle   uint8 = iota // tracked (e.g. checksum history) but no stream start yet
	flowActive              // started: FlowStart was called
	flowEnded               // ended: FlowEnd was called; kept to drop late segments
	flowFree                // on the free list
)

// run is a stretch of bytes held out of order, [start, end) in stream
// offsets; ts is the capture time of the earliest segment in it.
type run struct {
	start, end uint64
	ts         int64
}

// flow is the state of one flow direction. Flows live in one slice allocated
// by New and are addressed by index, so the table never allocates. The
// fields an in-order segment reads and writes come first, in one cache line.
// The held runs and the bytes, touched only out of order, live in a buffer
// that the direction holds only while it needs one, so a direction that
// holds nothing costs this struct alone (a few hundred bytes).
type flow struct {
	flowFields
	_ [flowPad]byte
}

// flowPad rounds the size of a flow up to a multiple of 64 bytes, so that
// the first cache line of every flow in the (page-aligned) table holds its
// hot fields; TestFlowLayout checks it. It is computed because the fields
// take fewer bytes where int and pointers are 32 bits wide. It is 1 to 64,
// never 0: a zero-size last field would make Go pad the struct.
const flowPad = 64 - unsafe.Sizeof(flowFields{})%64

// flowFields are the fields of a flow before its held runs.
type flowFields struct {
	// First cache line: what a lookup and an in-order segment read. The
	// key is kept as the words it has on the wire (see wireKey): a frame
	// is matched with two loads and two compares, no FlowKey built.
	wireAddrs uint64
	wirePorts uint32
	startSeq  uint32 // sequence number of stream offset 0
	nRuns     int
	next      uint64 // stream offset of the first undelivered byte
	histStart uint64 // delivered bytes before this offset are not in buf.ring
	lastSeen  int64
	state     uint8
	synSeen   bool // the start comes from this direction's SYN
	finSeen   bool // a FIN was seen; the direction ends when finOff is reached
	hadGood   bool // a segment with a good TCP checksum was seen
	offloaded bool // treated as checksum-offloaded
	badRun    uint8
	// pending: on the Assembler's list of flows that may expire (held runs
	// or a FIN waiting for data); entries leave it lazily.
	pending bool

	key                FlowKey // what the Handler is told
	hash               uint64
	idx                int32 // index in table.flows
	lruPrev, lruNext   int32 // most recently active at the head
	pendPrev, pendNext int32
	finOff             uint64
	finTs              int64
	holeSince          int64 // min ts of runs, valid when nRuns > 0

	// buf holds the runs (nil until needed, see buffer.go); bufPrev and
	// bufNext link the flows holding a buffer, oldest first.
	buf              *buffer
	bufPrev, bufNext int32
}

// table maps FlowKeys to flows with open addressing and linear probing, and
// keeps the flows in least-recently-active order for eviction.
type table struct {
	flows []flow
	slots []int32 // flow index + 1; 0 is empty
	mask  uint64
	shift uint
	free  []int32
	head  int32 // most recently active, -1 when empty
	tail  int32
	last  int32 // flow of the previous lookup: a cheap cache for bursts
	inUse int
	// recent maps a key's recentSlot to the index + 1 of the flow last
	// looked up there (0: none): a second cache, between last and the
	// hash table, one multiply deep, for interleaved flows. Only flows in
	// the table are in it.
	recent [recentSize]int32
}

// recentSize is the number of recent flows cached; a power of two.
const recentSize = 256

// recentSlot returns w's slot in table.recent. The XOR of both addresses
// and the ports (source port in the low half) keeps the two directions of a
// connection apart unless their ports are equal; the multiply brings all
// bits into the top ones.
func recentSlot(w wireKey) uint32 {
	return (uint32(w.addrs) ^ uint32(w.addrs>>32) ^ w.ports) * 0x9e3779b1 >> (32 - 8)
}

// recentFlow returns the index of w's flow if table.recent has it, else -1.
// Callers try t.last first.
func (t *table) recentFlow(w wireKey) int32 {
	fi := t.recent[recentSlot(w)%recentSize] - 1
	if fi < 0 || !t.flows[fi].hasKey(w) {
		return -1
	}
	t.last = fi
	return fi
}

func (t *table) init(n int) {
	t.flows = make([]flow, n)
	size := 1
	bitsN := uint(0)
	for size < 2*n {
		size <<= 1
		bitsN++
	}
	t.slots = make([]int32, size)
	t.mask = uint64(size - 1)
	t.shift = 64 - bitsN
	t.free = make([]int32, n)
	for i := range t.free {
		t.free[i] = int32(n - 1 - i)
	}
	t.head, t.tail, t.last = -1, -1, -1
}

// wireKey is a flow direction's key as two little-endian loads from its
// packet: the IPv4 source and destination addresses (bytes 12 to 19 of the
// IPv4 header) and the TCP source and destination ports (bytes 0 to 3 of the
// TCP header).
type wireKey struct {
	addrs uint64
	ports uint32
}

// wireKeyOf returns the key of the segment seg carried by the IPv4 packet
// pkt; pkt holds at least 20 bytes and seg at least 4.
func wireKeyOf(pkt, seg []byte) wireKey {
	return wireKey{addrs: binary.LittleEndian.Uint64(pkt[12:20]), ports: binary.LittleEndian.Uint32(seg[0:4])}
}

// flowKey returns w as a FlowKey.
func (w wireKey) flowKey() FlowKey {
	var k FlowKey
	binary.LittleEndian.PutUint32(k.SrcIP[:], uint32(w.addrs))
	binary.LittleEndian.PutUint32(k.DstIP[:], uint32(w.addrs>>32))
	k.SrcPort = bits.ReverseBytes16(uint16(w.ports))
	k.DstPort = bits.ReverseBytes16(uint16(w.ports >> 16))
	return k
}

func (f *flow) hasKey(w wireKey) bool {
	return f.wireAddrs == w.addrs && f.wirePorts == w.ports
}

func hashKey(w wireKey) uint64 {
	h := w.addrs*0x9e3779b97f4a7c15 ^ uint64(w.ports)*0xc2b2ae3d27d4eb4f
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>32
}

// home returns the slot where h's probe sequence starts: h's top bits. New
// gives every table at least two slots (2*MaxFlows), so shift is below 64
// and the masked shift count is the shift itself (it spares the compiler's
// guard for counts of 64 and more); the result is below len(slots).
func (t *table) home(h uint64) uint64 {
	return h >> (t.shift & 63)
}

// lookup returns the index of w's flow, or -1 and w's hash. Callers try
// t.last and recentFlow themselves first.
func (t *table) lookup(w wireKey) (int32, uint64) {
	h := hashKey(w)
	for i := t.home(h); ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			return -1, h
		}
		if t.flows[s-1].hasKey(w) {
			t.last = s - 1
			t.recent[recentSlot(w)%recentSize] = s
			return s - 1, h
		}
	}
}

// insert adds w and returns its flow, which the caller initialises. The
// table must have a free flow.
func (t *table) insert(w wireKey, h uint64) int32 {
	fi := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	i := t.home(h)
	for t.slots[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = fi + 1
	f := &t.flows[fi]
	*f = flow{flowFields: flowFields{wireAddrs: w.addrs, wirePorts: w.ports, key: w.flowKey(), hash: h, idx: fi, lruPrev: -1, lruNext: -1, pendPrev: -1, pendNext: -1, bufPrev: -1, bufNext: -1}}
	t.pushFront(fi)
	t.inUse++
	t.last = fi
	t.recent[recentSlot(w)%recentSize] = fi + 1
	return fi
}

// remove deletes flow fi from the table and returns it to the free list.
func (t *table) remove(fi int32) {
	f := &t.flows[fi]
	i := t.home(f.hash)
	for t.slots[i] != fi+1 {
		i = (i + 1) & t.mask
	}
	// Backward-shift deletion keeps every probe sequence unbroken without
	// tombstones.
	t.slots[i] = 0
	for j := (i + 1) & t.mask; t.slots[j] != 0; j = (j + 1) & t.mask {
		h := t.home(t.flows[t.slots[j]-1].hash)
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j)) {
			t.slots[i] = t.slots[j]
			t.slots[j] = 0
			i = j
		}
	}
	t.unlink(fi)
	f.state = flowFree
	t.free = append(t.free, fi)
	t.inUse--
	if t.last == fi {
		t.last = -1
	}
	if r := &t.recent[recentSlot(wireKey{f.wireAddrs, f.wirePorts})%recentSize]; *r == fi+1 {
		*r = 0
	}
}

func (t *table) pushFront(fi int32) {
	f := &t.flows[fi]
	f.lruPrev = -1
	f.lruNext = t.head
	if t.head >= 0 {
		t.flows[t.head].lruPrev = fi
	}
	t.head = fi
	if t.tail < 0 {
		t.tail = fi
	}
}

func (t *table) unlink(fi int32) {
	f := &t.flows[fi]
	if f.lruPrev >= 0 {
		t.flows[f.lruPrev].lruNext = f.lruNext
	} else {
		t.head = f.lruNext
	}
	if f.lruNext >= 0 {
		t.flows[f.lruNext].lruPrev = f.lruPrev
	} else {
		t.tail = f.lruPrev
	}
	f.lruPrev, f.lruNext = -1, -1
}

func (t *table) touch(fi int32) {
	if t.head != fi {
		t.moveToFront(fi)
	}
}

// moveToFront makes fi, which is not the head, the most recently active
// flow: unlink and pushFront in one, without their cases for the head and
// an empty list (this runs for every segment when flows interleave).
func (t *table) moveToFront(fi int32) {
	f := &t.flows[fi]
	prev, next := f.lruPrev, f.lruNext
	t.flows[prev].lruNext = next
	if next >= 0 {
		t.flows[next].lruPrev = prev
	} else {
		t.tail = prev
	}
	f.lruPrev, f.lruNext = -1, t.head
	t.flows[t.head].lruPrev = fi
	t.head = fi
}
