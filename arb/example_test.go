package arb_test

import (
	"fmt"
	"time"

	"github.com/tickwire/tickwire/arb"
)

type printer struct{}

func (printer) Message(m *arb.Message) {
	fmt.Printf("seq %d %q from line %c\n", m.Seq, m.Data, 'A'+m.Line)
}

func (printer) Gap(g arb.Gap) {
	fmt.Printf("lost %d-%d (%v)\n", g.From, g.To, g.Reason)
}

// Lines A and B of a MoldUDP64 feed: each loses a packet, B fills A's hole,
// and the message that neither line carried is declared lost after the gap
// timeout.
func Example() {
	a, err := arb.New(arb.Config{GapTimeout: 10 * time.Millisecond}, printer{})
	if err != nil {
		panic(err)
	}
	const A, B = 0, 1
	ms := int64(time.Millisecond)
	pkt := func(seq uint64, msg string) []byte { return arb.AppendMold(nil, "20261202A", seq, 0, []byte(msg)) }
	a.Datagram(A, pkt(1, "one"), 0*ms)
	a.Datagram(B, pkt(1, "one"), 1*ms) // duplicate
	a.Datagram(B, pkt(2, "two"), 2*ms) // A lost 2
	a.Datagram(A, pkt(3, "three"), 3*ms)
	a.Datagram(A, pkt(5, "five"), 4*ms) // both lost 4
	a.Datagram(B, pkt(5, "five"), 5*ms)
	a.Tick(20 * ms)
	a.End(20 * ms)
	for i, name := range "AB" {
		st := a.LineStats(i)
		fmt.Printf("line %c: won %d, duplicates %d, behind by %v at most\n",
			name, st.Wins, st.Duplicates, time.Duration(st.BehindMax))
	}
	// Output:
	// seq 1 "one" from line A
	// seq 2 "two" from line B
	// seq 3 "three" from line A
	// lost 4-4 (timeout)
	// seq 5 "five" from line A
	// line A: won 3, duplicates 0, behind by 0s at most
	// line B: won 1, duplicates 2, behind by 1ms at most
}

// A feed whose datagrams carry their sequence number in their first byte,
// arbitrated with a Sequence function: each datagram is one unit.
func ExampleConfig_sequence() {
	a, _ := arb.New(arb.Config{
		Sequence: func(p []byte) (uint64, bool) {
			if len(p) == 0 {
				return 0, false
			}
			return uint64(p[0]), true
		},
	}, printer{})
	a.Datagram(1, []byte{2, 'b'}, 0)
	a.Datagram(0, []byte{1, 'a'}, 1)
	a.Datagram(0, []byte{2, 'b'}, 2)
	fmt.Println(a.LineStats(0).Duplicates, "duplicate")
	// Output:
	// seq 1 "\x01a" from line A
	// seq 2 "\x02b" from line B
	// 1 duplicate
}

// MoldUDP64 packets are read in place: validate once, then walk the messages.
func ExampleMold() {
	p := arb.Mold(arb.AppendMold(nil, "SESSION1", 41, 0, []byte("hi"), []byte("there")))
	if err := p.Validate(); err != nil {
		panic(err)
	}
	fmt.Printf("session %q\n", p.SessionSlice())
	off := arb.MoldHeaderLen
	for i := 0; i < int(p.Count()); i++ {
		var msg []byte
		msg, off = p.NextMessage(off)
		fmt.Printf("%d %s\n", p.Seq()+uint64(i), msg)
	}
	// Output:
	// session "SESSION1  "
	// 41 hi
	// 42 there
}
