package main

import (
	"fmt"
	"net"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire"
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
// link/pipe, the server side counting what it reads: a reader goroutine
// per connection, or a Stack.ServeTCP handler.
type connSet struct {
	sp       *stackPair            // nil for kernel sockets
	srv      *tcpServer            // reader goroutines
	ln       *tickwire.TCPListener // ServeTCP
	clients  []net.Conn
	received atomic.Int64
	accepted sync.WaitGroup
}

// connCost is what one established, idle connection costs, both ends and
// the server's reader (goroutine or handler) counted, in bytes: heap
// objects, and goroutine stacks (see goroutineStacks).
type connCost struct{ heap, stack float64 }

// openConns establishes n connections, the server reading with a
// goroutine per connection or (handler) a ServeTCP handler, and reports
// the memory growth per connection, measured after a GC before and after.
func openConns(n, queueLen int, handler bool) (*connSet, connCost, error) {
	sp, err := newStackPair(max(n, minConnsCap), queueLen, false)
	if err != nil {
		return nil, connCost{}, err
	}
	cs := &connSet{sp: sp, clients: make([]net.Conn, n)}
	heap0 := heapAlloc()
	g0 := runtime.NumGoroutine()
	cs.accepted.Add(n)
	if handler {
		cs.ln, err = sp.server.ServeTCP(connsServer, func(_ *tickwire.TCPConn, data []byte, _ error) {
			cs.received.Add(int64(len(data)))
		})
		go func() { // a handler runs only when bytes arrive: count accepts from the Stats
			for sp.server.Stats().ConnsAccepted < uint64(n) {
				time.Sleep(time.Millisecond)
			}
			for range n {
				cs.accepted.Done()
			}
		}()
	} else {
		var ln *tickwire.TCPListener
		if ln, err = sp.server.ListenTCP(connsServer); err == nil {
			cs.srv = serveTCP(ln, cs.countReads)
		}
	}
	if err != nil {
		sp.Close()
		return nil, connCost{}, err
	}
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
		return nil, connCost{}, err
	default:
	}
	waited := make(chan struct{})
	go func() { cs.accepted.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		cs.close()
		return nil, connCost{}, fmt.Errorf("only some of %d connections were accepted", n)
	}
	heap1 := heapAlloc()
	return cs, connCost{
		heap:  float64(int64(heap1)-int64(heap0)) / float64(n),
		stack: goroutineStacks(runtime.NumGoroutine()-g0) / float64(n),
	}, nil
}

// countReads is a server connection's reader goroutine: it counts the
// connection as accepted, then what it reads, until an error.
func (cs *connSet) countReads(c net.Conn) {
	cs.accepted.Done()
	buf := make([]byte, manyChunk)
	for {
		k, err := c.Read(buf)
		cs.received.Add(int64(k))
		if err != nil {
			return
		}
	}
}

// close closes the stacks first: Stack.Close resets every connection at
// once, where closing 10,000 connections one by one takes many seconds.
// Then the connections' own Close calls only release them.
func (cs *connSet) close() {
	if cs.sp != nil {
		cs.sp.Close()
	} else if cs.srv != nil {
		// Kernel sockets: the server closes first, so that TIME-WAIT
		// holds the listening port's side, not 10,000 ephemeral ports.
		cs.srv.stop()
		cs.srv = nil
	}
	for _, c := range cs.clients {
		if c != nil {
			c.Close()
		}
	}
	if cs.srv != nil {
		cs.srv.stop()
	}
	if cs.ln != nil {
		cs.ln.Close()
	}
}

// goroutineStacks estimates the stack memory of n goroutines: n times the
// size the runtime gives a new goroutine's stack, which it sets at each
// collection to the average stack size it scanned
// (/gc/stack/starting-size:bytes). A delta of StackInuse cannot tell: a
// new goroutine takes a stack that an earlier round's goroutines freed in
// spans still counted (100 readers added 0 bytes), and a collection
// shrinks the stacks of goroutines that use little of theirs.
func goroutineStacks(n int) float64 {
	m := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return float64(n * 8 << 10) // the runtime's fixed start before Go 1.19
	}
	return float64(n) * float64(m[0].Value.Uint64())
}

// heapAlloc returns the live heap after a collection; closed stacks and
// their goroutines are given a moment to let go of their memory first:
// goroutines still exiting (an earlier round's readers) get up to a
// second to go, so that they do not leave between two readings.
func heapAlloc() uint64 {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		n := runtime.NumGoroutine()
		time.Sleep(20 * time.Millisecond)
		if runtime.NumGoroutine() >= n {
			break
		}
	}
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

// connMemory keeps the per-connection memory that tcp_10k_conns measured
// while opening its connections, by connection count, so that
// tcp_10k_conns_mem and tcp_10k_conns_stack reuse it instead of opening
// 10,000 connections again when they run together.
var connMemory = map[int][]connCost{}

// setupManyConns builds tcp_10k_conns, or with handler
// tcp_10k_conns_handler.
func setupManyConns(handler bool) func(p params) (*pair, error) {
	return func(p params) (*pair, error) {
		side := func(n int) func() (sample, error) {
			return func() (sample, error) {
				cs, cost, err := openConns(n, manyQueueLen, handler)
				if err != nil {
					return sample{}, err
				}
				defer cs.close()
				if !handler {
					connMemory[n] = append(connMemory[n], cost)
				}
				return manyConnsThroughput(cs, p.dur)
			}
		}
		return &pair{tickwire: side(p.conns), baseline: side(p.fewConns), close: func() {}}, nil
	}
}

// kernelConnsSpare is the open files kept for everything but the
// connections of openKernelConns.
const kernelConnsSpare = 128

// openKernelConns establishes n kernel TCP connections over loopback in
// the shape of openConns: a reader goroutine per connection counting what
// it reads. Both ends are in this process, two file descriptors a
// connection: with a lower open-file limit than that needs (and no
// CAP_SYS_RESOURCE to raise it) it opens as many as the limit allows.
func openKernelConns(n int) (*connSet, error) {
	n = min(n, (openFiles(2*n+kernelConnsSpare)-kernelConnsSpare)/2)
	if n < 1 {
		return nil, fmt.Errorf("%w: the open-file limit leaves no room for connections", errSkip)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cs := &connSet{clients: make([]net.Conn, n)}
	cs.accepted.Add(n)
	cs.srv = serveTCP(ln, cs.countReads)
	dial := kernelDial(ln.Addr())
	for i := range n {
		if cs.clients[i], err = dial(); err != nil {
			cs.close()
			return nil, fmt.Errorf("connection %d of %d: %w", i+1, n, err)
		}
	}
	cs.accepted.Wait()
	return cs, nil
}

// setupManyKernelConns builds tcp_10k_conns_kernel: the tcp_10k_conns
// shape on the machine's own stack, to tell what of tcp_10k_conns' ratio
// the machine (caches, memory, two cores) imposes on any stack.
func setupManyKernelConns(p params) (*pair, error) {
	side := func(n int) func() (sample, error) {
		return func() (sample, error) {
			cs, err := openKernelConns(n)
			if err != nil {
				return sample{}, err
			}
			defer cs.close()
			return manyConnsThroughput(cs, p.dur)
		}
	}
	return &pair{tickwire: side(p.conns), baseline: side(p.fewConns), close: func() {}}, nil
}

// setupManyConnsMemory builds tcp_10k_conns_mem (the heap) or, with stack,
// tcp_10k_conns_stack (the goroutine stacks), in KiB per connection.
func setupManyConnsMemory(stack bool) func(p params) (*pair, error) {
	pick := func(c connCost) sample {
		if stack {
			return sample{value: c.stack / 1024}
		}
		return sample{value: c.heap / 1024}
	}
	return func(p params) (*pair, error) {
		side := func(n int) func() (sample, error) {
			round := 0
			return func() (sample, error) {
				round++
				if m := connMemory[n]; round <= len(m) {
					return pick(m[round-1]), nil
				}
				cs, cost, err := openConns(n, manyQueueLen, false)
				if err != nil {
					return sample{}, err
				}
				cs.close()
				connMemory[n] = append(connMemory[n], cost)
				return pick(cost), nil
			}
		}
		return &pair{tickwire: side(p.conns), baseline: side(p.fewConns), close: func() {}}, nil
	}
}
