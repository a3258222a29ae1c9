package tickwire_test

import (
	"context"
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// examplePair returns two stacks joined by a pipe, B serving TCP echo on
// port 7, and a stop function.
func examplePair() (a, b *tickwire.Stack, stop func()) {
	pa, pb := pipe.New(pipe.Options{})
	a, err := tickwire.New(tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
	if err != nil {
		panic(err)
	}
	b, err = tickwire.New(tickwire.Config{Link: pb, MAC: pb.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
	if err != nil {
		panic(err)
	}
	ln, err := b.ListenTCP(7)
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return a, b, func() {
		ln.Close()
		a.Close()
		b.Close()
	}
}

// A connection's round-trip time, congestion window and byte counts.
func ExampleTCPConn_Info() {
	client, _, stop := examplePair()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.2:7"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 20000))
		wrote <- err
	}()
	if _, err := io.ReadFull(c, make([]byte, 20000)); err != nil {
		panic(err)
	}
	// BytesSent counts what Write returned: the echo can be back first.
	if err := <-wrote; err != nil {
		panic(err)
	}
	info := c.Info()
	fmt.Println(info.State, info.BytesSent, info.BytesReceived)
	fmt.Println("RTT measured:", info.RTT > 0, "window of 10 segments or more:", info.CongestionWindow >= 10)
	// Output:
	// ESTABLISHED 20000 20000
	// RTT measured: true window of 10 segments or more: true
}

// Publishing a Stack's counters with expvar: they appear, read afresh on
// each request, under /debug/vars of net/http's DefaultServeMux.
func ExampleStack_StatsVar() {
	client, _, stop := examplePair()
	defer stop()
	expvar.Publish("tickwire-example", client.StatsVar())

	var stats map[string]uint64
	if err := json.Unmarshal([]byte(expvar.Get("tickwire-example").String()), &stats); err != nil {
		panic(err)
	}
	fmt.Println(len(stats) == reflect.TypeFor[tickwire.Stats]().NumField(), stats["ConnsOpen"])
	// Output:
	// true 0
}
