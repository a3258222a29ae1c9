package main

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
)

// ringSource is -link dmaring: the capture is replayed by a software NIC
// (nicsim) into a link/dmaring RX ring, at full speed without loss and
// stamped with the capture times, and the frames are read back from the
// ring. It is a frame.Source that ends with io.EOF once every frame the
// NIC put on the ring was read.
type ringSource struct {
	ep     *dmaring.Endpoint
	dev    *nicsim.Device
	replay *nicsim.Replay
	q      *dmaring.RxQueue
	read   atomic.Uint64
	done   chan struct{} // closed when the watcher closed the endpoint
}

// openRing starts replaying src into a one-queue ring.
func openRing(src frame.Source, queues int) (*ringSource, error) {
	if queues != 1 {
		src.Close()
		return nil, fmt.Errorf("-link dmaring -queues %d: the software NIC steers every frame to queue 0 until RSS lands; use -queues 1", queues)
	}
	ep, err := dmaring.New(dmaring.Config{Queues: queues, RingLog: 10, BufSize: dmaring.MaxBufSize, MTU: dmaring.MaxBufSize - 14})
	if errors.Is(err, dmaring.ErrNotSupported) {
		ep, err = dmaring.New(dmaring.Config{Queues: queues, RingLog: 10, BufSize: dmaring.MaxBufSize, MTU: dmaring.MaxBufSize - 14, InMemory: true})
	}
	if err != nil {
		src.Close()
		return nil, err
	}
	replay := nicsim.NewReplay(src, nicsim.ReplayConfig{CaptureTime: true, Lossless: true})
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: replay})
	if err != nil {
		replay.Close()
		src.Close()
		ep.Close()
		return nil, err
	}
	s := &ringSource{ep: ep, dev: dev, replay: replay, q: ep.RxQueue(0), done: make(chan struct{})}
	go s.watch()
	return s, nil
}

// watch closes the endpoint, which ends ReadFrames with io.EOF, once the
// replay is over and the reader has every frame it put on the ring.
func (s *ringSource) watch() {
	defer close(s.done)
	<-s.replay.Done()
	frames, _ := s.replay.Counts()
	for s.read.Load() < frames && !s.ep.Closed() {
		time.Sleep(time.Millisecond)
	}
	s.ep.Close()
}

// ReadFrames implements frame.Source.
func (s *ringSource) ReadFrames(frames []frame.Frame) (int, error) {
	n, err := s.q.ReadFrames(frames)
	s.read.Add(uint64(n))
	if errors.Is(err, io.EOF) {
		if rerr := s.replay.Err(); rerr != nil {
			return n, rerr
		}
	}
	return n, err
}

// Close implements frame.Source: it stops the replay and the NIC and closes
// the endpoint.
func (s *ringSource) Close() error {
	s.dev.Close()
	s.ep.Close()
	<-s.done
	return nil
}

// dropped returns the frames the NIC could not put on the ring (not
// Ethernet, or longer than a ring buffer).
func (s *ringSource) dropped() uint64 {
	_, d := s.replay.Counts()
	return d
}
