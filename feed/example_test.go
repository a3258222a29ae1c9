package feed_test

import (
	"context"
	"fmt"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/mirror"
)

// Decode a capture with a little loss: the trades and orders come out with
// their flow, the bytes the capture lost as TCP gaps, the STEP messages they
// cut as sequence gaps.
func Example() {
	// A generated capture stands in for pcap.Open(file) or afpacket.New.
	capture, err := capgen.Generate(capgen.Options{Messages: 200, Seed: 2026, Impair: capgen.Impairments{Loss: 0.02}})
	if err != nil {
		panic(err)
	}
	src := capture.Source()

	var trades, orders int
	d, err := feed.New(feed.Config{}, feed.HandlerFuncs{
		OnTrade: func(t *sse.Trade, m feed.Meta) { trades++ },
		OnOrder: func(o *sse.Order, m feed.Meta) { orders++ },
		OnTCPGap: func(k mirror.FlowKey, offset, length uint64, ts int64) {
			fmt.Printf("TCP gap: %s lost %d bytes at offset %d\n", k, length, offset)
		},
		OnSequenceGap: func(category uint32, expected, got uint64, m feed.Meta) {
			fmt.Printf("sequence gap: category %d expected %d, got %d\n", category, expected, got)
		},
	})
	if err != nil {
		panic(err)
	}
	if err := d.Run(context.Background(), src); err != nil {
		panic(err)
	}
	d.Close()
	st := d.Stats()
	fmt.Printf("%d trades, %d orders; %d TCP gaps (%d bytes), %d sequence gaps\n",
		trades, orders, st.Mirror.Gaps, st.Mirror.GapBytes, st.SequenceGaps)
	// Output:
	// TCP gap: 10.31.0.1:9129->10.32.0.10:50000 lost 935 bytes at offset 10932
	// sequence gap: category 7 expected 18, got 19
	// sequence gap: category 58 expected 37, got 40
	// 233 trades, 666 orders; 1 TCP gaps (935 bytes), 2 sequence gaps
}

// The first trade of a capture, with the flow that carried it and its
// capture time.
func ExampleHandlerFuncs() {
	capture, err := capgen.Generate(capgen.Options{Messages: 20, Seed: 1})
	if err != nil {
		panic(err)
	}
	first := true
	d, err := feed.New(feed.Config{}, feed.HandlerFuncs{
		OnTrade: func(t *sse.Trade, m feed.Meta) {
			if first {
				first = false
				fmt.Printf("%s at %d: %s\n", m.Flow, m.Time, t.AppendText(nil))
			}
		},
	})
	if err != nil {
		panic(err)
	}
	for _, fr := range capture.Frames {
		d.HandleFrame(1, fr.Data, fr.Time) // 1: Ethernet (frame.LinkTypeEthernet)
	}
	d.Close()
	// Output:
	// 10.31.0.1:9129->10.32.0.10:50000 at 1772415000004059330: trade 600000 idx=1 ch=1 09:30:00.00 7.850x700.000=5495.00000 buy=1000030 sell=1000031 B biz=33
}
