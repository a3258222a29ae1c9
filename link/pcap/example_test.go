package pcap_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

// Write two frames to an in-memory pcap file, then read them back as a
// frame.Source.
func Example() {
	var file bytes.Buffer
	w, _ := pcap.NewWriter(&file, layers.LinkTypeEthernet, 0)
	w.WriteFrame(1_700_000_000_123456789, []byte("first frame..."), 0)
	w.WriteFrame(1_700_000_000_223456789, []byte("second"), 60)
	w.Flush()

	r, err := pcap.NewReader(&file)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	batch := frame.NewBatch(8, 2048)
	n, err := r.ReadFrames(batch)
	fmt.Println(r.Format(), n, err == io.EOF)
	for _, f := range batch[:n] {
		fmt.Printf("%d %q wire %d\n", f.Time, f.Data(), f.WireLen)
	}
	// Output:
	// pcap-ns 2 true
	// 1700000000123456789 "first frame..." wire 14
	// 1700000000223456789 "second" wire 60
}
