package main

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

const (
	manyWriters = 4        // writer goroutines of tcp_10k_conns, whatever the connection count
	manyChunk   = 16 << 10 // bytes per write in tcp_10k_conns
	dialWorkers = 8        // concurrent dialers while establishing
	minConnsCap = 64       // MaxConnections floor (tickwire's default)
	connsServer = 5001     // listening port
	connsGrace  = time.Second
	// firstBytesWait bounds how long a throughput sample that has received
	// nothing at its end waits for the first bytes.
	firstBytesWait = 5 * time.Second
	manyQueueLen   = 1 << 16 // pipe queue per direction: 100 concurrent writers overflow the default
)

// connSet is n established connections between two tickwire stacks over
// link/pipe, a reader goroutine per server side counting what it reads.
type connSet struct {
	sp       *stackPair
	srv      *tcpServer
	clients  []net.Conn
	received atomic.Int64
	accepted sync.WaitGroup
}

// openConns establishes n connections and reports the heap growth per
// connection (both ends and the reader goroutine's heap objects; goroutine
// stacks are not heap), measured after a GC before and after.
func openConns(n, queueLen int) (*connSet, float64, error) {
	sp, err := newStackPair(max(n, minConnsCap), queueLen, false)
	if err != nil {
		return nil, 0, err
	}
	ln, err := sp.server.ListenTCP(connsServer)
	if err != nil {
		sp.Close()
		return nil, 0, err
	}
	cs := &connSet{sp: sp, clients: make([]net.Conn, n)}
	heap0 := heapAlloc()
	cs.accepted.Add(n)
	cs.srv = serveTCP(ln, func(c net.Conn) {
		cs.accepted.Done()
		buf := make([]byte, manyChunk)
		for {
			k, err := c.Read(buf)
			cs.received.Add(int64(k))
			if err != nil {
				return
			}
		}
	})
	dial := tickwireDial(sp.client, serverPrefix.Addr(), connsServer)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, dialWorkers)
	for range dialWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := dial()
				if err != nil {
					errs <- fmt.Errorf("connection %d of %d: %w", i+1, n, err)
					return
				}
				cs.clients[i] = c
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		cs.close()
		return nil, 0, err
	default:
	}
	waited := make(chan struct{})
	go func() { cs.accepted.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		cs.close()
		return nil, 0, fmt.Errorf("only some of %d connections were accepted", n)
	}
	perConn := float64(int64(heapAlloc())-int64(heap0)) / float64(n)
	return cs, perConn, nil
}

// close closes the stacks first: Stack.Close resets every connection at
// once, where closing 10,000 connections one by one takes many seconds.
// Then the connections' own Close calls only release them.
func (cs *connSet) close() {
	cs.sp.Close()
	for _, c := range cs.clients {
		if c != nil {
			c.Close()
		}
	}
	if cs.srv != nil {
		cs.srv.stop()
	}
}

// heapAlloc returns the live heap after a collection; closed stacks and
// their goroutines are given a moment to let go of their memory first.
func heapAlloc() uint64 {
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// manyConnsThroughput runs manyWriters writers for p.dur over all the
// connections of cs (writer w owns connections w, w+manyWriters, ... and
// writes manyChunk bytes to each in turn) and rates the bytes the servers
// read meanwhile, in Gb/s.
func manyConnsThroughput(cs *connSet, dur time.Duration) (sample, error) {
	buf := make([]byte, manyChunk)
	var stop atomic.Bool
	var writes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, manyWriters)
	writers := min(manyWriters, len(cs.clients))
	m0 := mallocs()
	r0 := cs.received.Load()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for i := w; i < len(cs.clients) && !stop.Load(); i += writers {
					if _, err := cs.clients[i].Write(buf); err != nil {
						if !stop.Load() {
							errs <- err
						}
						return
					}
					writes.Add(1)
				}
			}
		}()
	}
	time.Sleep(dur)
	got := cs.received.Load() - r0
	// A sample with nothing received yet measures only the start-up (the
	// tests' 30 ms samples under -race on a loaded machine): it is
	// extended until the first bytes arrive, within firstBytesWait.
	for waitUntil := time.Now().Add(firstBytesWait); got == 0 && time.Now().Before(waitUntil); got = cs.received.Load() - r0 {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	stop.Store(true)
	// Writers blocked on a full window finish their write once the readers
	// drain it; a deadline bounds the wait.
	for _, c := range cs.clients {
		c.SetWriteDeadline(time.Now().Add(connsGrace))
	}
	wg.Wait()
	s := sample{ops: writes.Load(), allocs: mallocs() - m0, value: float64(got) * 8 / elapsed.Seconds() / 1e9}
	select {
	case err := <-errs:
		return s, err
	default:
	}
	return s, nil
}

// connMemory keeps the per-connection heap figures that tcp_10k_conns
// measured while opening its connections, by connection count, so that
// tcp_10k_conns_mem reuses them instead of opening 10,000 connections
// again when both run.
var connMemory = map[int][]float64{}

func setupManyConns(p params) (*pair, error) {
	side := func(n int) func() (sample, error) {
		return func() (sample, error) {
			cs, perConn, err := openConns(n, manyQueueLen)
			if err != nil {
				return sample{}, err
			}
			defer cs.close()
			connMemory[n] = append(connMemory[n], perConn)
			return manyConnsThroughput(cs, p.dur)
		}
	}
	return &pair{tickwire: side(p.conns), baseline: side(p.fewConns), close: func() {}}, nil
}

func setupManyConnsMemory(p params) (*pair, error) {
	side := func(n int) func() (sample, error) {
		round := 0
		return func() (sample, error) {
			round++
			if m := connMemory[n]; round <= len(m) {
				return sample{value: m[round-1] / 1024}, nil
			}
			cs, perConn, err := openConns(n, manyQueueLen)
			if err != nil {
				return sample{}, err
			}
			cs.close()
			return sample{value: perConn / 1024}, nil
		}
	}
	return &pair{tickwire: side(p.conns), baseline: side(p.fewConns), close: func() {}}, nil
}
