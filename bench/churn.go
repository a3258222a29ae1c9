package main

import (
	"fmt"
	"io"
	"net"
	"time"
)

// churnPort is tcp_churn_mem's listening port.
const churnPort = 5002

// churnCycles is how many connections tcp_churn_mem's client closes first
// (the probe: 30,000 took the heap from 0.3 to 228 MiB); at least
// 2,000, so that the records outweigh the heap's noise even with the
// tests' parameters.
func churnCycles(p params) int { return max(p.conns, 2000) }

// churnMemory runs n connect/echo/close cycles from a fresh stack pair's
// client, which closes first, and returns the heap growth (after GC) per
// connection the client then holds in TIME-WAIT.
func churnMemory(n int) (sample, error) {
	sp, err := newStackPair(1024, 0, false)
	if err != nil {
		return sample{}, err
	}
	defer sp.Close()
	ln, err := sp.server.ListenTCP(churnPort)
	if err != nil {
		return sample{}, err
	}
	srv := serveTCP(ln, func(c net.Conn) { io.Copy(c, c) }) // closes at the client's FIN
	defer srv.stop()
	dial := tickwireDial(sp.client, serverPrefix.Addr(), churnPort)
	cycle := func() error {
		c, err := dial()
		if err != nil {
			return err
		}
		defer c.Close()
		b := []byte{1}
		if _, err := c.Write(b); err != nil {
			return err
		}
		_, err = io.ReadFull(c, b)
		return err
	}
	if err := cycle(); err != nil { // the first connection's one-time allocations
		return sample{}, err
	}
	heap0 := heapAlloc()
	tw0 := sp.client.Stats().TCPTimeWait
	for i := range n {
		if err := cycle(); err != nil {
			return sample{}, fmt.Errorf("cycle %d of %d: %w", i+1, n, err)
		}
	}
	// The last connections' FINs may still be on their way.
	want := tw0 + uint64(n)*9/10 // a dial may take the port of a connection in TIME-WAIT, ending it
	for deadline := time.Now().Add(10 * time.Second); sp.client.Stats().TCPTimeWait < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	heap1 := heapAlloc()
	st := sp.client.Stats()
	if st.TCPTimeWait <= tw0 {
		return sample{}, fmt.Errorf("no connection in TIME-WAIT after %d cycles (overflow %d)", n, st.TCPTimeWaitOverflow)
	}
	return sample{value: float64(int64(heap1)-int64(heap0)) / float64(st.TCPTimeWait-tw0)}, nil
}

func setupChurnMemory(p params) (*pair, error) {
	idle := max(p.conns/10, 200)
	return &pair{
		tickwire: func() (sample, error) { return churnMemory(churnCycles(p)) },
		baseline: func() (sample, error) {
			cs, cost, err := openConns(idle, 0, false)
			if err != nil {
				return sample{}, err
			}
			cs.close()
			return sample{value: cost.heap}, nil
		},
		close: func() {},
	}, nil
}
