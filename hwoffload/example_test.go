package hwoffload_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
)

// A host reading trades from a software twin that replays a capture. With
// a twin in another process (examples/u50twin), Open(ctx,
// "twin:/dev/shm/NAME") replaces Map and OpenRegion.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	feed, err := capgen.Generate(capgen.Options{Messages: 20, Seed: 1})
	if err != nil {
		panic(err)
	}
	tw, err := twin.New(twin.Config{Input: feed.Source()}) // region in Go memory
	if err != nil {
		panic(err)
	}
	defer tw.Close()
	m, err := tw.Region().Map()
	if err != nil {
		panic(err)
	}
	dev, err := hwoffload.OpenRegion(ctx, m)
	if err != nil {
		panic(err)
	}
	defer dev.Close()

	if err := dev.Run(ctx); err != nil { // the twin consumes its input from now on
		panic(err)
	}
	if err := dev.WaitStatus(ctx, hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		panic(err)
	}
	trades := dev.Ring(hwoffload.RingTrades)
	var t sse.Trade
	n := 0
	for {
		s, lost, ok := trades.Read() // in place, no allocation
		if !ok {
			break
		}
		if lost > 0 {
			fmt.Println("lost", lost)
		}
		if s.Trade(&t) && n == 0 {
			fmt.Println(t.String())
		}
		n++
	}
	fmt.Println(n, "trades; TRADES =", dev.Counters().Trades)
	// Output:
	// trade 600000 idx=1 ch=1 09:30:00.00 7.850x700.000=5495.00000 buy=1000030 sell=1000031 B biz=33
	// 15 trades; TRADES = 15
}
