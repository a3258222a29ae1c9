package recorder_test

import (
	"bytes"
	"fmt"

	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"

	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/link/pcap/recorder"
)

// Wrap a link so that every frame is recorded; the result is what a stack
// is given as its link.
func Example() {
	link := ethernet.New(channel.New(64, 1500, "\x02\x00\x00\x00\x00\x01"))
	var file bytes.Buffer
	rec, err := recorder.New(link, &file)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... tickwire.New(tickwire.Config{Link: rec, ...}) and traffic ...
	fmt.Println(rec.InjectFrame(make([]byte, 60))) // no stack attached yet
	if err := rec.Finish(); err != nil {
		fmt.Println(err)
	}
	r, _ := pcap.NewReader(&file)
	fmt.Println(r.Format(), r.LinkType(), rec.Stats().Sent)
	// Output:
	// pcap: endpoint not attached
	// pcap-ns Ethernet 0
}
