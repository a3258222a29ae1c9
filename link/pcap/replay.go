package pcap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tickwire/tickwire/link/frame"
)

// Injector receives replayed frames on the inbound path of a link, as if
// they had arrived from the wire. recorder.Endpoint implements it.
type Injector interface {
	// InjectFrame delivers one link-layer frame. It does NOT take ownership
	// of frame. It returns ErrNotAttached when nothing would receive the
	// frame; a Replayer stops on that error and counts any other one as a
	// rejected frame.
	InjectFrame(frame []byte) error
}

// TimestampInjector is an Injector that also takes the frame's capture
// time, which it hands to the stack as the frame's receive time (see
// link.TimestampDispatcher): a replayed feed then carries the times of
// the capture, as a backtest needs. recorder.Endpoint implements it; a
// Replayer uses it when its destination does.
type TimestampInjector interface {
	Injector
	// InjectFrameAt is InjectFrame for a frame captured at rx, in
	// nanoseconds since the Unix epoch (0: unknown).
	InjectFrameAt(frame []byte, rx int64) error
}

// ErrNotAttached is returned by an Injector whose link endpoint is not
// attached to a stack.
var ErrNotAttached = errors.New("pcap: endpoint not attached")

// Replay defaults.
const (
	DefaultReplayBatch     = 32
	DefaultReplayFrameSize = 65536 + 14
	DefaultProgressEvery   = 1024
)

// Replayer feeds the frames of a frame.Source into an Injector. The zero
// value replays everything as fast as possible. A Replayer holds no state
// between calls; each Replay call allocates its batch once.
type Replayer struct {
	// Speed scales the recorded pace: 0 replays as fast as possible, 1 at
	// the recorded pace, 2 twice as fast, 0.5 half as fast. Frames whose
	// timestamp is 0 or earlier than the previous frame's go at once.
	Speed float64
	// Count stops the replay after this many frames; 0 means all.
	Count int64
	// Progress, when set, is called from Replay's goroutine every
	// ProgressEvery frames and once at the end with the running totals. It
	// must not block for long: it delays the replay.
	Progress func(ReplayResult)
	// ProgressEvery defaults to DefaultProgressEvery frames.
	ProgressEvery int64
	// Batch and FrameSize size the read batch: Batch slots (default
	// DefaultReplayBatch) of FrameSize bytes (default
	// DefaultReplayFrameSize). Frames longer than a slot are skipped and
	// counted as truncated.
	Batch     int
	FrameSize int
}

// ReplayResult counts what a replay did.
type ReplayResult struct {
	Frames    int64         // frames injected
	Bytes     int64         // bytes injected
	Truncated int64         // frames skipped because the capture or the slot cut them
	Rejected  int64         // frames the Injector refused (malformed, too short)
	Elapsed   time.Duration // wall time since the replay started
}

// Replay reads src until io.EOF, Count frames, an error, or ctx is done,
// and injects every whole frame into dst. It returns the totals and nil at
// the end of src or Count, ctx.Err() when cancelled, or the error of src
// or of dst (ErrNotAttached). A link endpoint takes Ethernet frames only: a
// frame of another link type (Frame.LinkType other than Ethernet or 0)
// stops the replay with a *LinkTypeError before it is injected. Replay does
// not close src.
func (p *Replayer) Replay(ctx context.Context, src frame.Source, dst Injector) (ReplayResult, error) {
	batchLen := p.Batch
	if batchLen <= 0 {
		batchLen = DefaultReplayBatch
	}
	size := p.FrameSize
	if size <= 0 {
		size = DefaultReplayFrameSize
	}
	every := p.ProgressEvery
	if every <= 0 {
		every = DefaultProgressEvery
	}
	if p.Speed < 0 {
		return ReplayResult{}, fmt.Errorf("pcap: replay speed %v is negative", p.Speed)
	}
	batch := frame.NewBatch(batchLen, size)
	stamped, _ := dst.(TimestampInjector)

	var (
		res        ReplayResult
		start      = time.Now()
		firstTS    int64 // capture time of the first paced frame
		lastTS     int64
		timer      *time.Timer
		nextReport = every
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	finish := func(err error) (ReplayResult, error) {
		res.Elapsed = time.Since(start)
		if p.Progress != nil {
			p.Progress(res)
		}
		return res, err
	}

	for {
		if err := ctx.Err(); err != nil {
			return finish(err)
		}
		n, readErr := src.ReadFrames(batch)
		for i := range batch[:n] {
			f := &batch[i]
			if p.Count > 0 && res.Frames+res.Truncated+res.Rejected >= p.Count {
				return finish(nil)
			}
			if p.Speed > 0 && f.Time > 0 {
				if firstTS == 0 {
					firstTS = f.Time
				}
				if f.Time >= lastTS {
					lastTS = f.Time
					due := start.Add(time.Duration(float64(f.Time-firstTS) / p.Speed))
					if wait := time.Until(due); wait > 0 {
						if timer == nil {
							timer = time.NewTimer(wait)
						} else {
							timer.Reset(wait)
						}
						select {
						case <-ctx.Done():
							return finish(ctx.Err())
						case <-timer.C:
						}
					}
				}
			}
			if f.LinkType != frame.LinkTypeEthernet && f.LinkType != 0 {
				return finish(&LinkTypeError{LinkType: f.LinkType, Interface: -1})
			}
			if f.Truncated() {
				res.Truncated++
				continue
			}
			var err error
			if stamped != nil {
				err = stamped.InjectFrameAt(f.Data(), f.Time)
			} else {
				err = dst.InjectFrame(f.Data())
			}
			if err != nil {
				if errors.Is(err, ErrNotAttached) {
					return finish(err)
				}
				res.Rejected++
				continue
			}
			res.Frames++
			res.Bytes += int64(f.N)
			if p.Progress != nil && res.Frames >= nextReport {
				nextReport += every
				res.Elapsed = time.Since(start)
				p.Progress(res)
			}
		}
		if readErr == io.EOF {
			return finish(nil)
		}
		if readErr != nil {
			return finish(readErr)
		}
		if p.Count > 0 && res.Frames+res.Truncated+res.Rejected >= p.Count {
			return finish(nil)
		}
	}
}
