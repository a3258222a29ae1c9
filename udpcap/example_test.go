package udpcap_test

import (
	"bytes"
	"fmt"
	"net/netip"

	"github.com/gopacket/gopacket/layers"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/udpcap"
)

// Decode a capture of two multicast lines into datagrams per stream. The
// capture is written in memory here (eth and ipUDP build the frames); a
// real program opens a file with pcap.Open or captures with link/afpacket.
func Example() {
	var file bytes.Buffer
	w, _ := pcap.NewWriter(&file, layers.LinkTypeEthernet, 0)
	w.WriteFrame(1e9, eth(0x0800, ipUDP(src, groupA, []byte("tick 1"))), 0)
	w.WriteFrame(2e9, eth(0x0800, ipUDP(src, groupB, []byte("tick 1"))), 0)
	w.WriteFrame(3e9, eth(0x0800, ipUDP(src, netip.MustParseAddrPort("239.9.9.9:9"), nil)), 0)
	w.Flush()

	r, _ := pcap.NewReader(&file)
	d, _ := udpcap.New(udpcap.Config{Streams: []udpcap.Stream{
		{Group: netip.MustParseAddr("239.1.1.1"), Port: 5000}, // line A
		{Group: netip.MustParseAddr("239.1.1.2"), Port: 5000}, // line B
	}})
	err := d.Run(r, frame.NewBatch(16, 2048), func(dg *udpcap.Datagram) {
		fmt.Printf("stream %d at %ds from %v: %q\n", dg.Stream, dg.Time/1e9, dg.Src, dg.Payload)
	})
	fmt.Println(err, d.Stats().Unmatched, "unmatched")
	// Output:
	// stream 0 at 1s from 10.0.0.1:4000: "tick 1"
	// stream 1 at 2s from 10.0.0.1:4000: "tick 1"
	// <nil> 1 unmatched
}
