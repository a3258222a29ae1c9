package step_test

import (
	"fmt"

	"github.com/tickwire/tickwire/fast/sse/step"
)

func ExampleParser() {
	h := step.Header{MsgType: []byte("UA3201"), SeqNum: 1, HasCategory: true, Category: 7, CategorySeq: 1}
	stream := step.AppendMessage(nil, &h, []byte{0xc0, 0x19, 0x81})
	fmt.Printf("%q\n", stream)
	h.SeqNum, h.CategorySeq = 2, 3 // category sequence 2 is missing
	stream = step.AppendMessage(stream, &h, []byte{0x80})

	p := step.NewParser(step.Config{})
	for len(stream) > 0 {
		n := min(7, len(stream))
		p.Feed(stream[:n])
		stream = stream[n:]
		for {
			m, err := p.Next()
			if err != nil {
				fmt.Println(err)
				continue
			}
			if m == nil {
				break
			}
			fmt.Printf("%s seq %d category %d/%d payload % x gap %v\n", m.MsgType, m.SeqNum, m.Category, m.CategorySeq, m.Payload, m.Gap)
		}
	}
	// Output:
	// "8=STEP.1.0.0\x019=43\x0135=UA3201\x0134=1\x0110142=7\x0110072=1\x0195=3\x0196=\xc0\x19\x81\x0110=063\x01"
	// UA3201 seq 1 category 7/1 payload c0 19 81 gap false
	// UA3201 seq 2 category 7/3 payload 80 gap true
}
