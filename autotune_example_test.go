package tickwire_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// Receive-buffer auto-tuning: a connection starts with a window of
// Config.ReceiveBuffer and, while its program reads faster than that
// window per round trip, grows it up to Config.ReceiveBufferMax.
func ExampleConfig_receiveBufferMax() {
	pa, pb := pipe.New(pipe.Options{})
	sender, err := tickwire.New(tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer sender.Close()
	receiver, err := tickwire.New(tickwire.Config{
		Link: pb, MAC: pb.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24"),
		ReceiveBuffer:    32 << 10,  // the window every connection starts with
		ReceiveBufferMax: 256 << 10, // at worst MaxConnections x 2 x 256 KiB held
	})
	if err != nil {
		panic(err)
	}
	defer receiver.Close()
	ln, err := receiver.ListenTCP(9)
	if err != nil {
		panic(err)
	}
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := sender.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:9"))
	if err != nil {
		panic(err)
	}
	go func() {
		defer c.Close()
		c.Write(make([]byte, 16<<20))
	}()
	r, err := ln.AcceptTCP()
	if err != nil {
		panic(err)
	}
	defer r.Close()
	fmt.Println("window at first:", r.Info().ReceiveBuffer)
	if _, err := io.Copy(io.Discard, r); err != nil {
		panic(err)
	}
	// How far it grows depends on how fast this reader keeps up; on an
	// idle machine, to the bound.
	w := r.Info().ReceiveBuffer
	fmt.Println("grown:", w > 32<<10, "within the bound:", w <= 256<<10)
	// Output:
	// window at first: 32768
	// grown: true within the bound: true
}
