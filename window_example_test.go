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

// Send-buffer auto-tuning: a connection starts with a send buffer of
// Config.SendBuffer and, as its congestion window opens, grows it up to
// Config.SendBufferMax, so that a stream keeps a window's worth of data in
// flight instead of Config.SendBuffer's.
func ExampleConfig_sendBufferMax() {
	pa, pb := pipe.New(pipe.Options{})
	sender, err := tickwire.New(tickwire.Config{
		Link: pa, MAC: pa.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24"),
		SendBuffer:    32 << 10,  // the buffer every connection starts with
		SendBufferMax: 256 << 10, // at worst MaxConnections x 256 KiB held
	})
	if err != nil {
		panic(err)
	}
	defer sender.Close()
	receiver, err := tickwire.New(tickwire.Config{Link: pb, MAC: pb.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
	if err != nil {
		panic(err)
	}
	defer receiver.Close()
	ln, err := receiver.ListenTCP(9)
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		r, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(io.Discard, r)
		r.Close()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := sender.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:9"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println("send buffer at first:", c.Info().SendBuffer)
	buf := make([]byte, 64<<10)
	for range 256 { // 16 MiB
		if _, err := c.Write(buf); err != nil {
			panic(err)
		}
	}
	b := c.Info().SendBuffer
	fmt.Println("grown:", b > 32<<10, "within the bound:", b <= 256<<10)
	// Output:
	// send buffer at first: 32768
	// grown: true within the bound: true
}

// Idle connections keep their congestion window by default: a connection
// that writes now and then (one client of thousands, an order session
// between bursts) sends a 16 KiB write at once. SlowStartAfterIdle
// restores RFC 5681's restart from the initial window (10 segments of
// 1408 bytes here), so the write leaves in two flights a round trip apart.
func ExampleConfig_slowStartAfterIdle() {
	for _, restart := range []bool{false, true} {
		pa, pb := pipe.New(pipe.Options{})
		sender, err := tickwire.New(tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24"),
			SlowStartAfterIdle: restart})
		if err != nil {
			panic(err)
		}
		receiver, err := tickwire.New(tickwire.Config{Link: pb, MAC: pb.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
		if err != nil {
			panic(err)
		}
		ln, err := receiver.ListenTCP(9)
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := sender.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:9"))
		cancel()
		if err != nil {
			panic(err)
		}
		r, err := ln.AcceptTCP()
		if err != nil {
			panic(err)
		}
		// transfer writes n bytes and returns once they have been read.
		transfer := func(n int) {
			done := make(chan struct{})
			go func() {
				io.ReadFull(r, make([]byte, n))
				close(done)
			}()
			c.Write(make([]byte, n))
			<-done
		}
		// Slow start opens the window past 16 KiB (12 segments); a
		// retransmission timeout on a loaded machine can close it again.
		for i := 0; i < 10 && c.Info().CongestionWindow < 12; i++ {
			transfer(256 << 10)
		}
		time.Sleep(time.Second) // longer than the retransmission timeout
		sent := pa.Stats().Sent
		transfer(16 << 10)
		fmt.Printf("SlowStartAfterIdle %v: a 16 KiB write after an idle second left in %d frame(s)\n",
			restart, pa.Stats().Sent-sent)
		c.Close()
		r.Close()
		ln.Close()
		sender.Close()
		receiver.Close()
	}
	// Output:
	// SlowStartAfterIdle false: a 16 KiB write after an idle second left in 1 frame(s)
	// SlowStartAfterIdle true: a 16 KiB write after an idle second left in 2 frame(s)
}
