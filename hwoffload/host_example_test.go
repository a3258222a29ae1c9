package hwoffload_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/link/pipe"
)

// The host path: a peer on the twin's network port connects to a LISTEN
// port, and the host answers through the command ring with a net.Conn.
// Over a TAP device (examples/u50twin -tap) the peer is the kernel.
func ExampleDevice_Listen() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := pipe.New(pipe.Options{}) // the twin's network port, the peer's
	peer, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		panic(err)
	}
	defer peer.Close()
	tw, err := twin.New(twin.Config{Link: a})
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
	if err := dev.Configure(hwoffload.Config{Addr: netip.MustParsePrefix("10.9.0.2/24"), MAC: a.MAC()}); err != nil {
		panic(err)
	}
	if err := dev.Run(ctx); err != nil {
		panic(err)
	}

	ln, err := dev.Listen(ctx, 7) // LISTEN
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept() // ACCEPTED on ring 3
		if err != nil {
			return
		}
		io.Copy(c, c) // RECV notifications and SEND commands
		c.Close()     // CLOSE
	}()

	c, err := peer.DialTCP(ctx, netip.MustParseAddrPort("10.9.0.2:7"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	buf := make([]byte, 5)
	io.ReadFull(c, buf)
	fmt.Println(string(buf))
	// Output: hello
}
