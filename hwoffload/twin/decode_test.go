package twin_test

import (
	"bytes"
	"testing"

	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/mirror"
)

// TestDecodeErrorRecord: a STEP message whose checksum digit was changed on
// the wire gives one decode error record with that message's stream offset
// and the code CHECKSUM, and DECODE_ERRORS 1; the other messages decode.
func TestDecodeErrorRecord(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 200, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Find a message whose trailer "10=NNN\x01" lies whole in one frame and
	// change its last checksum digit there (TCP checksums are ignored).
	fl := &f.Flows[0]
	var start uint64
	done := false
	for i := len(f.Records) / 2; i < len(f.Records) && !done; i++ {
		r := &f.Records[i]
		tail := fl.Stream[r.End-16 : r.End]
		for _, fr := range f.Frames {
			if j := bytes.Index(fr.Data, tail); j >= 0 && bytes.Count(fr.Data, tail) == 1 {
				fr.Data[j+14] ^= 1 // the checksum's last digit, still a digit
				start, done = r.Start, true
				break
			}
		}
	}
	if !done {
		t.Fatal("no message trailer found whole in a frame")
	}
	_, dev := startConfig(t, twin.Config{Input: f.Source(), RingLog2: 12, Feed: feed.Config{Checksum: mirror.ChecksumIgnore}})
	if err := dev.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitStatus(ctxT(t), hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		t.Fatal(err)
	}
	var errs int
	serverFlow := ^uint32(0)
	ev := dev.Ring(hwoffload.RingEvents)
	for {
		s, _, ok := ev.Read()
		if !ok {
			break
		}
		if s.Kind() == hwoffload.KindFlowStart {
			if _, _, sport, _ := s.FlowAddrs(); sport == fl.Server.Port {
				serverFlow = s.Flow()
			}
		}
		if s.Kind() != hwoffload.KindDecodeError {
			continue
		}
		errs++
		off, code := s.DecodeError()
		if off != start || string(bytes.TrimRight(code[:], "\x00")) != "CHECKSUM" || s.Flow() != serverFlow {
			t.Errorf("decode error at offset %d code %q flow %d; want offset %d, CHECKSUM, flow %d", off, code, s.Flow(), start, serverFlow)
		}
	}
	if c := dev.Counters(); errs != 1 || c.DecodeErrors != 1 {
		t.Errorf("%d decode error records, DECODE_ERRORS %d; want 1", errs, c.DecodeErrors)
	}
	if got, want := dev.Counters().Trades+dev.Counters().Orders, uint64(len(f.Records)); got >= want || got == 0 {
		t.Errorf("%d records decoded of %d: want all but the bad message's", got, want)
	}
}

func TestDecodeErrorCode(t *testing.T) {
	if c := twin.DecodeErrorCode(nil); c != "ERROR" {
		t.Errorf("code of nil: %q", c)
	}
}
