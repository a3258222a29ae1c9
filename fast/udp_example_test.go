package fast_test

import (
	"fmt"
	"log"

	"github.com/tickwire/tickwire/fast"
)

// FAST over UDP multicast: each datagram carries one or several messages,
// and the sender resets its dictionaries at the start of every datagram,
// so a datagram decodes on its own. The receiver calls Reset before each
// datagram and decodes until the datagram's end: a lost datagram (here the
// second) costs its own messages and never corrupts the copy, increment
// and delta state of the next one.
func ExampleDecoder_Reset() {
	ts, err := fast.ParseTemplates([]byte(exampleTemplates))
	if err != nil {
		log.Fatal(err)
	}
	trade, _ := ts.ByID(7)
	enc, _ := fast.NewEncoder(ts, nil)
	var m fast.Message
	var datagrams [][]byte
	seq := uint64(100)
	for _, prices := range [][]int64{{12345, 12350}, {12355}, {12360, 12365}} {
		enc.Reset() // the sender's reset at every datagram
		var dg []byte
		for _, px := range prices {
			m.SetTemplate(trade)
			m.AddUint(seq)
			m.AddBytes([]byte("600000"))
			m.AddDecimal(px, -2)
			m.AddUint(300)
			if dg, err = enc.Encode(dg, &m); err != nil {
				log.Fatal(err)
			}
			seq++
		}
		datagrams = append(datagrams, dg)
	}
	received := [][]byte{datagrams[0], datagrams[2]} // the second datagram is lost

	dec, _ := fast.NewDecoder(ts, nil)
	for _, dg := range received {
		dec.Reset()
		for off := 0; off < len(dg); {
			n, err := dec.Decode(dg[off:], &m)
			if err != nil {
				log.Fatal(err) // a datagram holds whole messages: ErrShort is an error too
			}
			fmt.Printf("%s\n", m.AppendJSON(nil))
			off += n
		}
	}
	// Output:
	// {"template":7,"name":"Trade","fields":{"Seq":100,"Symbol":"600000","Price":"123.45","Qty":300}}
	// {"template":7,"name":"Trade","fields":{"Seq":101,"Symbol":"600000","Price":"123.50","Qty":300}}
	// {"template":7,"name":"Trade","fields":{"Seq":103,"Symbol":"600000","Price":"123.60","Qty":300}}
	// {"template":7,"name":"Trade","fields":{"Seq":104,"Symbol":"600000","Price":"123.65","Qty":300}}
}
