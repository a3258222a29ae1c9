package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Timeouts of the phases where the server waits for the client.
const (
	handshakeTimeout = 10 * time.Second // cookie, parameters, stream creation
	resultsTimeout   = 10 * time.Second // results exchange and IPERF_DONE
	drainQuiet       = 50 * time.Millisecond
	drainMax         = 3 * time.Second
)

// Server serves iperf3 tests, one at a time, like `iperf3 -s`: TCP control
// and data connections arrive on one listener, UDP data streams on one
// packet socket bound to the same port. It works on any net.Listener and
// net.PacketConn: tickwire's in examples/iperf3d, the kernel's in tests.
type Server struct {
	ln  net.Listener
	pc  net.PacketConn // nil: UDP tests fail when streams are created
	log io.Writer

	mu sync.Mutex
	// +checklocks:mu
	active *session
	// +checklocks:mu
	acceptSeq uint64
	// +checklocks:mu
	udp map[netip.AddrPort]*stream

	wg   sync.WaitGroup // accept loop, UDP loop, sessions, cookie readers
	done chan struct{}  // closed when Serve stops
}

// session is one test, from the control connection's cookie to IPERF_DONE.
type session struct {
	ctrl   net.Conn
	cookie []byte
	params Params

	// Streams arrive here while the session creates them. wantTCP and
	// wantUDP count the streams still expected; guarded by Server.mu.
	streams          chan *stream
	wantTCP, wantUDP int

	running atomic.Bool // UDP datagrams are counted only while running
	start   time.Time
	// counted is when the reported period began: the start, or the end
	// of the omitted seconds (-O), in Unix nanoseconds.
	counted atomic.Int64
}

// stream is one data stream.
type stream struct {
	seq    uint64 // arrival order, which gives the iperf3 stream id
	id     int
	conn   net.Conn       // TCP streams
	addr   netip.AddrPort // UDP streams: the client's address
	sender bool           // the server sends (reverse mode)

	bytes   atomic.Uint64 // TCP, and UDP sent
	packets atomic.Uint64 // UDP sent
	omitted atomic.Uint64 // bytes moved during the omitted seconds (-O)

	mu sync.Mutex
	// +checklocks:mu
	rx udpReceiver // UDP received
}

// NewServer returns a server on ln and pc (pc may be nil) logging one line
// per test to log.
func NewServer(ln net.Listener, pc net.PacketConn, log io.Writer) *Server {
	return &Server{ln: ln, pc: pc, log: log, udp: map[netip.AddrPort]*stream{}, done: make(chan struct{})}
}

// Serve serves until ctx is done, then closes the listener, the packet
// socket and the test in progress, and returns once every goroutine it
// started has ended.
func (s *Server) Serve(ctx context.Context) error {
	s.wg.Add(1)
	go s.acceptLoop()
	if s.pc != nil {
		s.wg.Add(1)
		go s.udpLoop()
	}
	<-ctx.Done()
	close(s.done)
	s.ln.Close()
	if s.pc != nil {
		s.pc.Close()
	}
	s.mu.Lock()
	if a := s.active; a != nil {
		a.ctrl.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.acceptSeq++
		seq := s.acceptSeq
		s.mu.Unlock()
		s.wg.Add(1)
		go s.classify(c, seq)
	}
}

// classify reads a new connection's cookie and makes it the control
// connection of a new test, a data stream of the test in progress, or
// turns it away with ACCESS_DENIED.
func (s *Server) classify(c net.Conn, seq uint64) {
	defer s.wg.Done()
	cookie := make([]byte, cookieSize)
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	if _, err := io.ReadFull(c, cookie); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	s.mu.Lock()
	switch a := s.active; {
	case a == nil:
		a = &session{ctrl: c, cookie: cookie, streams: make(chan *stream, MaxStreams)}
		s.active = a
		s.mu.Unlock()
		s.runSession(a)
	case bytes.Equal(cookie, a.cookie) && a.wantTCP > 0:
		a.wantTCP--
		s.mu.Unlock()
		a.streams <- &stream{seq: seq, conn: c, sender: a.params.Reverse}
	default:
		s.mu.Unlock()
		writeState(c, stateAccessDenied)
		c.Close()
	}
}

// udpLoop receives every datagram on the UDP socket: a 4-byte datagram
// from a new address while a UDP test creates its streams is a stream's
// "connect"; the rest is data of a known stream.
func (s *Server) udpLoop() {
	defer s.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. an ICMP error reported on the socket
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			continue
		}
		ap := ua.AddrPort()
		arrival := time.Now()
		s.mu.Lock()
		st := s.udp[ap]
		a := s.active
		if st == nil && n == 4 && a != nil && a.wantUDP > 0 {
			a.wantUDP--
			s.acceptSeq++
			st = &stream{seq: s.acceptSeq, addr: ap, sender: a.params.Reverse}
			s.udp[ap] = st
			s.mu.Unlock()
			s.pc.WriteTo(udpConnectReply, from)
			a.streams <- st
			continue
		}
		s.mu.Unlock()
		if st == nil || st.sender || a == nil || !a.running.Load() {
			continue
		}
		st.mu.Lock()
		st.rx.add(buf[:n], arrival, a.params.Counters64)
		st.mu.Unlock()
	}
}

// runSession runs one test on its control connection and clears it.
func (s *Server) runSession(a *session) {
	var streams []*stream
	defer func() {
		a.ctrl.Close()
		s.mu.Lock()
		s.active = nil
		for _, st := range streams {
			if st.conn != nil {
				st.conn.Close()
			} else {
				delete(s.udp, st.addr)
			}
		}
		s.mu.Unlock()
	}()
	streams, err := s.test(a)
	peer := a.ctrl.RemoteAddr()
	if err != nil {
		fmt.Fprintf(s.log, "iperf3d: test from %v: %v\n", peer, err)
	}
}

// test runs the protocol of one test, returning the streams it created.
func (s *Server) test(a *session) (streams []*stream, err error) {
	c := a.ctrl
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := writeState(c, stateParamExchange); err != nil {
		return nil, err
	}
	raw, err := readJSON(c)
	if err != nil {
		return nil, fmt.Errorf("reading parameters: %w", err)
	}
	p, err := ParseParams(raw)
	if err != nil {
		var pe *ParamError
		if errors.As(err, &pe) {
			writeServerError(c, pe.Code, 0)
		}
		return nil, err
	}
	if p.UDP && s.pc == nil {
		writeServerError(c, errUnimplemented, 0)
		return nil, errors.New("no UDP socket")
	}
	s.mu.Lock()
	a.params = p
	if p.UDP {
		a.wantUDP = p.Parallel
	} else {
		a.wantTCP = p.Parallel
	}
	s.mu.Unlock()
	if err := writeState(c, stateCreateStreams); err != nil {
		return nil, err
	}
	timeout := time.After(handshakeTimeout)
	for len(streams) < p.Parallel {
		select {
		case st := <-a.streams:
			streams = append(streams, st)
		case <-timeout:
			return streams, fmt.Errorf("%d of %d streams created", len(streams), p.Parallel)
		case <-s.done:
			return streams, net.ErrClosed
		}
	}
	sort.Slice(streams, func(i, j int) bool { return streams[i].seq < streams[j].seq })
	for i, st := range streams {
		st.id = streamID(i)
	}

	if err := writeState(c, stateTestStart); err != nil {
		return streams, err
	}
	// Receive from before TEST_RUNNING, as the client sends as soon as it
	// reads it; send from after, as the client counts only from then.
	a.start = time.Now()
	a.counted.Store(a.start.UnixNano())
	a.running.Store(true)
	if p.Omit > 0 {
		// As iperf3's server does, leave the first seconds out of the
		// results; the client leaves them out of its own.
		omit := time.AfterFunc(time.Duration(p.Omit)*time.Second, func() { a.resetStats(streams) })
		defer omit.Stop()
	}
	var w *workers
	if !p.Reverse {
		w = s.startWorkers(a, streams)
	}
	if err := writeState(c, stateTestRunning); err != nil {
		if w != nil {
			w.stop(streams)
		}
		return streams, err
	}
	if p.Reverse {
		w = s.startWorkers(a, streams)
	}

	// The client ends the test; it sends nothing else meanwhile.
	c.SetDeadline(time.Time{})
	var state [1]byte
	if _, err := io.ReadFull(c, state[:]); err != nil {
		w.stop(streams)
		return streams, fmt.Errorf("waiting for TEST_END: %w", err)
	}
	if state[0] != stateTestEnd {
		w.stop(streams)
		return streams, fmt.Errorf("client sent state %d during the test", int8(state[0]))
	}
	end := time.Now()
	if !p.Reverse {
		// TCP delivers every byte of a -n or -k test; UDP may drop some,
		// so only its quiet period counts.
		var want uint64
		if !p.UDP {
			want = max(p.Bytes, p.Blocks*uint64(p.BlockSize))
		}
		drain(streams, want)
	}
	a.running.Store(false)
	w.stop(streams)
	elapsed := end.Sub(time.Unix(0, a.counted.Load()))

	c.SetDeadline(time.Now().Add(resultsTimeout))
	if err := writeState(c, stateExchangeResults); err != nil {
		return streams, err
	}
	if _, err := readJSON(c); err != nil {
		return streams, fmt.Errorf("reading the client's results: %w", err)
	}
	res := a.results(streams, elapsed)
	if err := writeJSON(c, res); err != nil {
		return streams, err
	}
	if err := writeState(c, stateDisplayResults); err != nil {
		return streams, err
	}
	if _, err := io.ReadFull(c, state[:]); err != nil || state[0] != stateIperfDone {
		return streams, fmt.Errorf("no IPERF_DONE (state %d, %v)", int8(state[0]), err)
	}
	var total uint64
	for _, r := range res.Streams {
		total += r.Bytes
	}
	kind, dir := "TCP", "received"
	if p.UDP {
		kind = "UDP"
	}
	if p.Reverse {
		dir = "sent"
	}
	fmt.Fprintf(s.log, "iperf3d: test from %v: %s, %d stream(s), %d bytes %s in %.2f s (%.3f Gb/s)\n",
		c.RemoteAddr(), kind, len(streams), total, dir, elapsed.Seconds(), float64(total)*8/elapsed.Seconds()/1e9)
	return streams, nil
}

// resetStats starts the reported period: what the streams moved so far is
// omitted from the results.
func (a *session) resetStats(streams []*stream) {
	a.counted.Store(time.Now().UnixNano())
	for _, st := range streams {
		st.omitted.Store(st.bytes.Load())
		st.mu.Lock()
		st.rx.bytes, st.rx.jitter = 0, 0
		st.mu.Unlock()
	}
}

// results builds the server's side of the results exchange.
func (a *session) results(streams []*stream, elapsed time.Duration) results {
	res := results{SenderHasRetransmits: -1, Streams: []streamResult{}}
	if a.params.Reverse {
		res.SenderHasRetransmits = 0 // retransmissions are not counted per stream
	}
	if !a.params.UDP {
		res.CongestionUsed = "reno"
	}
	for _, st := range streams {
		r := streamResult{ID: st.id, Bytes: st.bytes.Load() - st.omitted.Load(), Retransmits: -1, EndTime: elapsed.Seconds()}
		if a.params.UDP {
			if st.sender {
				r.Packets = st.packets.Load()
			} else {
				st.mu.Lock()
				r.Bytes, r.Packets, r.Errors, r.Jitter = st.rx.bytes, st.rx.packets, st.rx.lost, st.rx.jitter
				st.mu.Unlock()
			}
		}
		res.Streams = append(res.Streams, r)
	}
	return res
}

// drain waits until the receiving streams have read what was in flight
// when the client ended the test, so the bytes reported match the bytes
// sent: at least want bytes in all (what a -n or -k test sends) and then
// no new byte for drainQuiet, at most drainMax in all.
func drain(streams []*stream, want uint64) {
	total := func() uint64 {
		var t uint64
		for _, st := range streams {
			t += st.bytes.Load()
			st.mu.Lock()
			t += st.rx.bytes
			st.mu.Unlock()
		}
		return t
	}
	deadline := time.Now().Add(drainMax)
	last := total()
	for time.Now().Before(deadline) {
		time.Sleep(drainQuiet)
		now := total()
		if now == last && now >= want {
			return
		}
		last = now
	}
}

// workers are the goroutines moving a test's data.
type workers struct {
	stopped atomic.Bool
	wg      sync.WaitGroup
}

// stop ends the workers and closes the TCP streams, as iperf3's server
// does on TEST_END: senders stop at their next write (a blocked write is
// cut short by a deadline), receivers when their connection closes. The
// close matters in reverse mode: the client reads whole blocks, and would
// otherwise wait for the rest of a block that never comes.
func (w *workers) stop(streams []*stream) {
	w.stopped.Store(true)
	for _, st := range streams {
		if st.conn != nil {
			if st.sender {
				st.conn.SetWriteDeadline(time.Now())
			} else {
				st.conn.Close()
			}
		}
	}
	w.wg.Wait()
	for _, st := range streams {
		if st.conn != nil {
			st.conn.Close()
		}
	}
}

func (s *Server) startWorkers(a *session, streams []*stream) *workers {
	w := &workers{}
	p := a.params
	var total atomic.Uint64 // bytes sent by all streams, for -n
	var blocks atomic.Uint64
	// more reports whether the senders may write another block, and counts it.
	more := func() bool {
		if w.stopped.Load() {
			return false
		}
		if p.Blocks > 0 && blocks.Add(1) > p.Blocks {
			return false
		}
		return p.Bytes == 0 || total.Load() < p.Bytes
	}
	for _, st := range streams {
		w.wg.Add(1)
		switch {
		case st.conn != nil && !st.sender:
			go func() {
				defer w.wg.Done()
				buf := make([]byte, p.BlockSize)
				for {
					n, err := st.conn.Read(buf)
					st.bytes.Add(uint64(n))
					if err != nil {
						return
					}
				}
			}()
		case st.conn != nil:
			go func() {
				defer w.wg.Done()
				buf := make([]byte, p.BlockSize)
				start := time.Now()
				for more() {
					n, err := st.conn.Write(buf)
					st.bytes.Add(uint64(n))
					total.Add(uint64(n))
					if err != nil {
						return
					}
					pace(start, st.bytes.Load(), p.Bandwidth)
				}
			}()
		case st.sender:
			go func() {
				defer w.wg.Done()
				buf := make([]byte, p.BlockSize)
				dst := net.UDPAddrFromAddrPort(st.addr)
				start := time.Now()
				for more() {
					n := st.packets.Add(1)
					putUDPHeader(buf, time.Now(), n, p.Counters64)
					if _, err := s.pc.WriteTo(buf, dst); err != nil {
						st.packets.Add(^uint64(0))
						if errors.Is(err, net.ErrClosed) {
							return
						}
						time.Sleep(time.Millisecond) // a full buffer: retry
						continue
					}
					st.bytes.Add(uint64(len(buf)))
					total.Add(uint64(len(buf)))
					pace(start, st.bytes.Load(), p.Bandwidth)
				}
			}()
		default:
			w.wg.Done() // UDP receivers are served by udpLoop
		}
	}
	return w
}

// pace sleeps until sent bytes are due at rate bits/s from start; rate 0
// means unlimited.
func pace(start time.Time, sent, rate uint64) {
	if rate == 0 {
		return
	}
	due := start.Add(time.Duration(float64(sent) * 8 / float64(rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}
