package nicsim_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

// A capture replayed by the software NIC into an RX ring, stamped with the
// capture times, and read back with the borrow path.
func ExampleNewReplay() {
	f, err := os.CreateTemp("", "nicsim-example-*.pcap")
	if err != nil {
		panic(err)
	}
	defer os.Remove(f.Name())
	w, err := pcap.NewWriter(f, layers.LinkTypeEthernet, 2048)
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		w.WriteFrame(int64(1_700_000_000+i)*1e9, make([]byte, 60+i), 0) // three frames, a second apart
	}
	w.Flush()
	f.Close()

	ep, err := dmaring.New(dmaring.Config{InMemory: true})
	if err != nil {
		panic(err)
	}
	defer ep.Close()
	src, err := pcap.Open(filepath.Clean(f.Name()))
	if err != nil {
		panic(err)
	}
	replay := nicsim.NewReplay(src, nicsim.ReplayConfig{CaptureTime: true, Lossless: true})
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: replay})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	<-replay.Done()

	q := ep.RxQueue(0)
	frames := make([]frame.Frame, 8)
	n, _ := q.BorrowFrames(frames)
	for _, fr := range frames[:n] {
		fmt.Println(len(fr.Data()), "bytes at", fr.Time/1e9)
	}
	q.ReleaseBorrowed()
	// Output:
	// 60 bytes at 1700000000
	// 61 bytes at 1700000001
	// 62 bytes at 1700000002
}
