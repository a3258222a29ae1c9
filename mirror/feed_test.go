package mirror_test

import (
	"fmt"
	"testing"

	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/mirror"
)

// TestGeneratedFeeds replays synthetic SSE feeds (internal/capgen, the
// generator behind examples/feedgen) with mirror impairments and checks,
// for every flow, that the delivered bytes are the sent stream and that the
// reported gaps are exactly the ranges the capture lost (up to the last
// delivered byte).
func TestGeneratedFeeds(t *testing.T) {
	cases := []capgen.Options{
		{Messages: 3000, Seed: 1},
		{Messages: 3000, Seed: 2, Flows: 3, VLAN: 6, WrapISN: true, Impair: capgen.Impairments{Reorder: 0.1, Dup: 0.05, Overlap: 0.05}},
		{Messages: 3000, Seed: 3, Flows: 2, Impair: capgen.Impairments{Loss: 0.02, Reorder: 0.1, Dup: 0.05, Overlap: 0.05}},
		{Messages: 3000, Seed: 4, WrapISN: true, Impair: capgen.Impairments{Loss: 0.1, Reorder: 0.3}},
	}
	if raceEnabled {
		cases = cases[:2]
	}
	for _, opt := range cases {
		t.Run(fmt.Sprintf("seed%d", opt.Seed), func(t *testing.T) {
			fd, err := capgen.Generate(opt)
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(t)
			a, err := mirror.New(mirror.Config{}, rec)
			if err != nil {
				t.Fatal(err)
			}
			for i, fr := range fd.Frames {
				if err := a.HandleFrame(fr.Data, fr.Time); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			a.Close()
			for _, fl := range fd.Flows {
				var s *stream
				for k, v := range rec.streams {
					if k.String() == fl.Key() {
						s = v
					}
				}
				if s == nil {
					t.Fatalf("flow %s never started", fl.Key())
				}
				end := uint64(len(s.img))
				var lost []gapRec
				for _, r := range fl.Lost {
					if r.Offset < end {
						lost = append(lost, gapRec{r.Offset, min(r.Length, end-r.Offset)})
					}
				}
				if fmt.Sprint(s.gaps) != fmt.Sprint(lost) {
					t.Errorf("%s: gaps %v, lost %v", fl.Key(), s.gaps, lost)
				}
				for o, ok := range s.delivered {
					if ok && s.img[o] != fl.Stream[o] {
						t.Fatalf("%s: byte %d differs from the stream", fl.Key(), o)
					}
				}
				if len(fl.Lost) == 0 && end != fl.StreamBytes {
					t.Errorf("%s: delivered %d of %d bytes without loss", fl.Key(), end, fl.StreamBytes)
				}
			}
			if st := a.Stats(); st.ChecksumBad != 0 || st.Malformed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}
