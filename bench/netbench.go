package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// Addresses of the two in-process stacks.
var (
	clientPrefix = netip.MustParsePrefix("10.77.0.1/24")
	serverPrefix = netip.MustParsePrefix("10.77.0.2/24")
)

const (
	rttSize   = 64       // bytes per ping and per pong
	bulkWrite = 64 << 10 // bytes per write in tcp_bulk
	echoPort  = 7
)

// stackPair is two tickwire stacks joined by link/pipe, with static ARP so
// no round pays for resolution.
type stackPair struct {
	client, server *tickwire.Stack
	link           *pipe.Endpoint // the client's end
}

// newStackPair joins two stacks with a pipe whose queues hold queueLen
// frames per direction (0: the pipe's default), both in latency mode when
// latency is set. Every connection comes from the client's one address, so
// the server's per-source limit is maxConns too.
func newStackPair(maxConns, queueLen int, latency bool) (*stackPair, error) {
	return newStackPairLocked(maxConns, queueLen, latency, false)
}

// newStackPairLocked is newStackPair with Config.LockOSThread set to lock.
func newStackPairLocked(maxConns, queueLen int, latency, lock bool) (*stackPair, error) {
	a, b := pipe.New(pipe.Options{QueueLen: queueLen})
	arp := map[netip.Addr]net.HardwareAddr{clientPrefix.Addr(): a.MAC(), serverPrefix.Addr(): b.MAC()}
	client, err := tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: clientPrefix, MaxConnections: maxConns, MaxConnectionsPerSource: maxConns, StaticARP: arp, Latency: latency, LockOSThread: lock})
	if err != nil {
		b.Close()
		return nil, err
	}
	server, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: serverPrefix, MaxConnections: maxConns, MaxConnectionsPerSource: maxConns, StaticARP: arp, Latency: latency, LockOSThread: lock})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &stackPair{client: client, server: server, link: a}, nil
}

func (p *stackPair) Close() {
	p.client.Close()
	p.server.Close()
}

// dialer opens a TCP connection to the server side of a measure.
type dialer func() (net.Conn, error)

// tcpServer accepts connections on ln and runs handle on each in its own
// goroutine; stop closes the listener and every connection and joins them.
type tcpServer struct {
	ln net.Listener
	wg sync.WaitGroup
	mu sync.Mutex
	// +checklocks:mu
	conns map[net.Conn]struct{}
}

func serveTCP(ln net.Listener, handle func(net.Conn)) *tcpServer {
	s := &tcpServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				handle(c)
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		}
	}()
	return s
}

func (s *tcpServer) stop() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// echo returns every byte it reads, rttSize bytes at a time.
func echo(c net.Conn) {
	buf := make([]byte, rttSize)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// stallTimeout is added to a sample's duration as the deadline of its
// connection, so that a lost peer fails the round instead of hanging it.
const stallTimeout = 10 * time.Second

// tcpPingPong times rttSize-byte round trips on c.
func tcpPingPong(c net.Conn, p params) (sample, error) {
	out := make([]byte, rttSize)
	in := make([]byte, rttSize)
	c.SetDeadline(time.Now().Add(p.dur + stallTimeout))
	return timeOps(p.dur, 200, true, func() error {
		if _, err := c.Write(out); err != nil {
			return err
		}
		_, err := io.ReadFull(c, in)
		return err
	})
}

// tcpRTTSide sets up an echo server on ln and a client from dial, and
// returns the round-trip sampler and its cleanup.
func tcpRTTSide(ln net.Listener, dial dialer, p params) (func() (sample, error), func(), error) {
	srv := serveTCP(ln, echo)
	c, err := dial()
	if err != nil {
		srv.stop()
		return nil, nil, err
	}
	return func() (sample, error) { return tcpPingPong(c, p) },
		func() { c.Close(); srv.stop() }, nil
}

func kernelDial(addr net.Addr) dialer {
	return func() (net.Conn, error) { return net.DialTimeout("tcp", addr.String(), stallTimeout) }
}

func tickwireDial(from *tickwire.Stack, to netip.Addr, port int) dialer {
	return func() (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return from.DialTCP(ctx, netip.AddrPortFrom(to, uint16(port)))
	}
}

func setupTCPRTT(p params) (*pair, error) {
	sp, err := newStackPair(0, 0, false)
	if err != nil {
		return nil, err
	}
	ln, err := sp.server.ListenTCP(echoPort)
	if err != nil {
		sp.Close()
		return nil, err
	}
	tw, twClose, err := tcpRTTSide(ln, tickwireDial(sp.client, serverPrefix.Addr(), echoPort), p)
	if err != nil {
		sp.Close()
		return nil, err
	}
	k, kClose, err := kernelTCPRTTSide(p)
	if err != nil {
		twClose()
		sp.Close()
		return nil, err
	}
	return &pair{tickwire: tw, baseline: k, close: func() { twClose(); kClose(); sp.Close() }}, nil
}

// setupTCPRTTLocked builds tcp_rtt_64B_locked: a net.Conn client pinging
// a Stack.ServeTCP echo handler, whose goroutine is locked to its OS thread
// (Config.LockOSThread), against the same with nothing locked.
func setupTCPRTTLocked(p params) (*pair, error) {
	var sides [2]func() (sample, error)
	var closes []func()
	closeAll := func() {
		for _, c := range closes {
			c()
		}
	}
	for i, lock := range []bool{true, false} {
		sp, err := newStackPairLocked(0, 0, false, lock)
		if err != nil {
			closeAll()
			return nil, err
		}
		ln, err := sp.server.ServeTCP(echoPort, echoHandler)
		if err != nil {
			sp.Close()
			closeAll()
			return nil, err
		}
		c, err := tickwireDial(sp.client, serverPrefix.Addr(), echoPort)()
		if err != nil {
			ln.Close()
			sp.Close()
			closeAll()
			return nil, err
		}
		closes = append(closes, func() { c.Close(); ln.Close(); sp.Close() })
		sides[i] = func() (sample, error) { return tcpPingPong(c, p) }
	}
	return &pair{tickwire: sides[0], baseline: sides[1], close: closeAll}, nil
}

// kernelTCPRTTSide is the loopback baseline of the in-process TCP
// ping-pongs: a Go net client and echo server on 127.0.0.1.
func kernelTCPRTTSide(p params) (func() (sample, error), func(), error) {
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	return tcpRTTSide(kln, kernelDial(kln.Addr()), p)
}

// setupTCPRTTLatency builds tcp_rtt_64B_latency: tickwire's handler API in
// latency mode (a ServeTCP echo handler, a client taking the echo in its
// OnReceive handler) against the kernel loopback of tcp_rtt_64B.
func setupTCPRTTLatency(p params) (*pair, error) {
	sp, err := newStackPair(0, 0, true)
	if err != nil {
		return nil, err
	}
	ln, err := sp.server.ServeTCP(echoPort, echoHandler)
	if err != nil {
		sp.Close()
		return nil, err
	}
	twClose := func() { ln.Close(); sp.Close() }
	nc, err := tickwireDial(sp.client, serverPrefix.Addr(), echoPort)()
	if err != nil {
		twClose()
		return nil, err
	}
	twClose = func() { nc.Close(); ln.Close(); sp.Close() }
	hc, err := newHandlerClient(nc.(*tickwire.TCPConn))
	if err != nil {
		twClose()
		return nil, err
	}
	k, kClose, err := kernelTCPRTTSide(p)
	if err != nil {
		twClose()
		return nil, err
	}
	return &pair{
		tickwire: func() (sample, error) { return hc.pingPong(p) },
		baseline: k,
		close:    func() { twClose(); kClose() },
	}, nil
}

// echoHandler is a ServeTCP handler that writes back what it receives, from
// the goroutine that delivered it, and closes at the end of the stream. A
// 64-byte echo always fits the send buffer, so its Write never meets
// ErrSendBufferFull.
func echoHandler(c *tickwire.TCPConn, data []byte, err error) {
	if err != nil {
		c.Close()
		return
	}
	c.Write(data)
}

// handlerClient is the ping side of the handler API: its OnReceive handler
// only counts the bytes that come back, and a round trip waits for the count
// (over link/pipe in latency mode the echo has usually been counted before
// Write returns, so the wait costs nothing).
type handlerClient struct {
	c        *tickwire.TCPConn
	received atomic.Int64 // bytes the handler saw
	ended    atomic.Bool  // the handler's last call came
	sent     int64        // bytes written; the pinging goroutine's own
}

func newHandlerClient(c *tickwire.TCPConn) (*handlerClient, error) {
	h := &handlerClient{c: c}
	err := c.OnReceive(func(_ *tickwire.TCPConn, data []byte, err error) {
		if err != nil {
			h.ended.Store(true)
			return
		}
		h.received.Add(int64(len(data)))
	})
	return h, err
}

// errStalled fails a round whose echo does not come back.
var errStalled = errors.New("bench: no echo within the stall timeout")

// pingPong times rttSize-byte round trips.
func (h *handlerClient) pingPong(p params) (sample, error) {
	out := make([]byte, rttSize)
	deadline := time.Now().Add(p.dur + stallTimeout)
	return timeOps(p.dur, 200, true, func() error {
		h.sent += rttSize
		if _, err := h.c.Write(out); err != nil {
			return err
		}
		for spins := 0; h.received.Load() < h.sent; spins++ {
			if h.ended.Load() {
				return io.ErrUnexpectedEOF
			}
			// time.Now only now and then: the wait is normally a few spins.
			if spins%1024 == 1023 && time.Now().After(deadline) {
				return errStalled
			}
			runtime.Gosched()
		}
		return nil
	})
}

// udpEcho answers every datagram on pc until pc is closed, through the
// allocation-free ReadFromUDPAddrPort/WriteToUDPAddrPort pair that both
// *net.UDPConn and *tickwire.UDPConn have.
func udpEcho(pc addrPortConn, done *sync.WaitGroup) {
	defer done.Done()
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		pc.WriteToUDPAddrPort(buf[:n], from)
	}
}

type addrPortConn interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

// udpPingPong times rttSize-byte datagram round trips on c. A lost
// datagram fails the round (after a generous deadline) instead of hanging.
func udpPingPong(c net.Conn, p params) (sample, error) {
	out := make([]byte, rttSize)
	in := make([]byte, 2048)
	c.SetReadDeadline(time.Now().Add(p.dur + stallTimeout))
	return timeOps(p.dur, 200, true, func() error {
		if _, err := c.Write(out); err != nil {
			return err
		}
		n, err := c.Read(in)
		if err == nil && n != rttSize {
			err = fmt.Errorf("echo of %d bytes, want %d", n, rttSize)
		}
		return err
	})
}

// kernelUDPRTTSide is the kernel loopback baseline of the UDP measures.
func kernelUDPRTTSide(p params) (func() (sample, error), func(), error) {
	kpc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go udpEcho(kpc, &wg)
	kc, err := net.Dial("udp", kpc.LocalAddr().String())
	if err != nil {
		kpc.Close()
		wg.Wait()
		return nil, nil, err
	}
	return func() (sample, error) { return udpPingPong(kc, p) }, func() {
		kc.Close()
		kpc.Close()
		wg.Wait()
	}, nil
}

// setupUDPRTT builds udp_rtt_64B (an echo goroutine reading a ListenUDP
// socket) or, with latency set, udp_rtt_64B_latency (latency mode, the echo
// from a Stack.ServeUDP handler on the delivering goroutine).
func setupUDPRTT(latency bool) func(p params) (*pair, error) {
	return func(p params) (*pair, error) {
		sp, err := newStackPair(0, 0, latency)
		if err != nil {
			return nil, err
		}
		var wg sync.WaitGroup
		var srv io.Closer
		if latency {
			srv, err = sp.server.ServeUDP(echoPort, func(c *tickwire.UDPConn, b []byte, from netip.AddrPort) {
				c.WriteToUDPAddrPort(b, from)
			})
		} else {
			var pc *tickwire.UDPConn
			if pc, err = sp.server.ListenUDP(echoPort); err == nil {
				srv = pc
				wg.Add(1)
				go udpEcho(pc, &wg)
			}
		}
		if err != nil {
			sp.Close()
			return nil, err
		}
		stop := func() {
			srv.Close()
			wg.Wait()
			sp.Close()
		}
		c, err := sp.client.DialUDP(netip.AddrPortFrom(serverPrefix.Addr(), echoPort))
		if err != nil {
			stop()
			return nil, err
		}
		kernel, kernelClose, err := kernelUDPRTTSide(p)
		if err != nil {
			c.Close()
			stop()
			return nil, err
		}
		return &pair{
			tickwire: func() (sample, error) { return udpPingPong(c, p) },
			baseline: kernel,
			close: func() {
				c.Close()
				kernelClose()
				stop()
			},
		}, nil
	}
}

// discardCount reads c to EOF, then reports how many bytes it read.
func discardCount(c net.Conn, done chan<- int64) {
	buf := make([]byte, bulkWrite)
	var n int64
	for {
		k, err := c.Read(buf)
		n += int64(k)
		if err != nil {
			done <- n
			return
		}
	}
}

// bulkRound streams bulkWrite-byte writes on a new connection for p.dur,
// then half-closes it, and rates the bytes the receiver read by the time
// it saw the end.
func bulkRound(ln net.Listener, dial dialer, p params) (sample, error) {
	done := make(chan int64, 1)
	acceptErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			acceptErr <- err
			return
		}
		c.SetDeadline(time.Now().Add(p.dur + stallTimeout))
		discardCount(c, done)
		c.Close()
	}()
	c, err := dial()
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(p.dur + stallTimeout))
	buf := make([]byte, bulkWrite)
	var s sample
	m0 := mallocs()
	start := time.Now()
	for time.Since(start) < p.dur {
		if _, err := c.Write(buf); err != nil {
			return s, err
		}
		s.ops++
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
	var got int64
	select {
	case got = <-done:
	case err := <-acceptErr:
		return s, err
	}
	elapsed := time.Since(start)
	s.allocs = mallocs() - m0
	s.value = float64(got) * 8 / elapsed.Seconds() / 1e9
	return s, nil
}

func setupBulk(p params) (*pair, error) {
	sp, err := newStackPair(0, 0, false)
	if err != nil {
		return nil, err
	}
	ln, err := sp.server.ListenTCP(9)
	if err != nil {
		sp.Close()
		return nil, err
	}
	kln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sp.Close()
		return nil, err
	}
	twDial := tickwireDial(sp.client, serverPrefix.Addr(), 9)
	return &pair{
		tickwire: func() (sample, error) { return bulkRound(ln, twDial, p) },
		baseline: func() (sample, error) { return bulkRound(kln, kernelDial(kln.Addr()), p) },
		close:    func() { ln.Close(); kln.Close(); sp.Close() },
	}, nil
}

// bulkPairs builds one pair of stacks per entry of latency (latency mode
// as the entry says), each with a tcp_bulk listener on the server and a
// dialer from the client; closeAll releases them.
func bulkPairs(latency ...bool) (lns []net.Listener, dials []dialer, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range closers {
			c()
		}
	}
	for _, l := range latency {
		sp, err := newStackPair(0, 0, l)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		ln, err := sp.server.ListenTCP(9)
		if err != nil {
			sp.Close()
			closeAll()
			return nil, nil, nil, err
		}
		closers = append(closers, func() { ln.Close(); sp.Close() })
		lns, dials = append(lns, ln), append(dials, tickwireDial(sp.client, serverPrefix.Addr(), 9))
	}
	return lns, dials, closeAll, nil
}

// setupBulkLatency builds tcp_bulk_latency: tcp_bulk between two stacks in
// latency mode against the same between two stacks in stock mode.
func setupBulkLatency(p params) (*pair, error) {
	lns, dials, closeAll, err := bulkPairs(true, false)
	if err != nil {
		return nil, err
	}
	return &pair{
		tickwire: func() (sample, error) { return bulkRound(lns[0], dials[0], p) },
		baseline: func() (sample, error) { return bulkRound(lns[1], dials[1], p) },
		close:    closeAll,
	}, nil
}

// setupBulk2Cores builds tcp_bulk_2cores: two tcp_bulk streams at once on
// two pairs of stacks against one stream on one pair.
func setupBulk2Cores(p params) (*pair, error) {
	lns, dials, closeAll, err := bulkPairs(false, false)
	if err != nil {
		return nil, err
	}
	both := func() (sample, error) {
		var ss [2]sample
		var errs [2]error
		var wg sync.WaitGroup
		for i := range ss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ss[i], errs[i] = bulkRound(lns[i], dials[i], p)
			}()
		}
		wg.Wait()
		s := sample{value: ss[0].value + ss[1].value, ops: ss[0].ops + ss[1].ops, allocs: ss[0].allocs}
		return s, errors.Join(errs[0], errs[1])
	}
	return &pair{
		tickwire: both,
		baseline: func() (sample, error) { return bulkRound(lns[0], dials[0], p) },
		close:    closeAll,
	}, nil
}

// connectRound opens connections one after another for p.dur: dial, wait
// for the server's close (it closes each as soon as it accepts it), close.
// The server closing first keeps the TIME-WAIT state on its side, so the
// client's ephemeral ports do not run out over a long run.
func connectRound(ln net.Listener, dial dialer, p params) (sample, error) {
	srv := serveTCP(ln, func(net.Conn) {})
	defer srv.stop()
	var b [1]byte
	return timeOps(p.dur, 20, false, func() error {
		c, err := dial()
		if err != nil {
			return err
		}
		if _, err := c.Read(b[:]); err != io.EOF {
			c.Close()
			return fmt.Errorf("read after the server's close: %v, want EOF", err)
		}
		return c.Close()
	})
}

func setupConnect(p params) (*pair, error) {
	var sp *stackPair
	closeStacks := func() {
		if sp != nil {
			sp.Close()
		}
	}
	return &pair{
		// Fresh stacks and listeners each round, so connections in
		// TIME-WAIT from earlier rounds do not pile up.
		tickwire: func() (sample, error) {
			closeStacks()
			var err error
			if sp, err = newStackPair(1024, 0, false); err != nil {
				return sample{}, err
			}
			ln, err := sp.server.ListenTCP(echoPort)
			if err != nil {
				return sample{}, err
			}
			return connectRound(ln, tickwireDial(sp.client, serverPrefix.Addr(), echoPort), p)
		},
		baseline: func() (sample, error) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return sample{}, err
			}
			return connectRound(ln, kernelDial(ln.Addr()), p)
		},
		close: closeStacks,
	}, nil
}
