package main

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/frame"
)

// ringSource is -link dmaring: the capture is replayed by a software NIC
// (nicsim) into link/dmaring RX rings, at full speed without loss and
// stamped with the capture times, and the frames are read back from the
// rings. With one queue it is itself the frame.Source; with more, RSS
// spreads the flow directions over the queues and each queue is a
// frame.Source of its own (queue). Every queue's reads end with io.EOF once
// every frame the NIC put on the rings was read.
type ringSource struct {
	ep     *dmaring.Endpoint
	dev    *nicsim.Device
	replay *nicsim.Replay
	q      *dmaring.RxQueue
	read   atomic.Uint64 // frames read, from all queues
	times  *captureTimes // with more than one queue: the capture's clock
	done   chan struct{} // closed when the watcher closed the endpoint
}

// openRing starts replaying src into queues RX rings (the NIC's default
// RSS spreads them).
func openRing(src frame.Source, queues int) (*ringSource, error) {
	cfg := dmaring.Config{Queues: queues, RingLog: 10, BufSize: dmaring.MaxBufSize, MTU: dmaring.MaxBufSize - 14}
	ep, err := dmaring.New(cfg)
	if errors.Is(err, dmaring.ErrNotSupported) {
		cfg.InMemory = true
		ep, err = dmaring.New(cfg)
	}
	if err != nil {
		src.Close()
		return nil, err
	}
	var times *captureTimes
	if queues > 1 {
		times = &captureTimes{}
		src = &timedSource{Source: src, times: times}
	}
	replay := nicsim.NewReplay(src, nicsim.ReplayConfig{CaptureTime: true, Lossless: true})
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: replay})
	if err != nil {
		replay.Close()
		src.Close()
		ep.Close()
		return nil, err
	}
	s := &ringSource{ep: ep, dev: dev, replay: replay, q: ep.RxQueue(0), times: times, done: make(chan struct{})}
	go s.watch()
	return s, nil
}

// queue returns RX queue i as a frame.Source. Its Close does nothing: the
// ringSource's Close closes every queue.
func (s *ringSource) queue(i int) frame.Source { return queueSource{s, s.ep.RxQueue(i)} }

// queueSource is one RX queue of a ringSource.
type queueSource struct {
	s *ringSource
	q *dmaring.RxQueue
}

// ReadFrames implements frame.Source.
func (qs queueSource) ReadFrames(frames []frame.Frame) (int, error) {
	return qs.s.readFrom(qs.q, frames)
}

// Close implements frame.Source; it does nothing (see ringSource.queue).
func (queueSource) Close() error { return nil }

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

// ReadFrames implements frame.Source: it reads RX queue 0.
func (s *ringSource) ReadFrames(frames []frame.Frame) (int, error) { return s.readFrom(s.q, frames) }

// readFrom reads q, counting the frames for the watcher, and reports the
// replay's error at the end.
func (s *ringSource) readFrom(q *dmaring.RxQueue, frames []frame.Frame) (int, error) {
	n, err := q.ReadFrames(frames)
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
