package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/tickwire/tickwire/link/frame"
)

// FuzzReader feeds arbitrary bytes to the reader: it must return frames of
// supported link types or a typed error, never panic or hang. The crafted pcapng seeds in
// testdata/fuzz/FuzzReader reach the block and record bounds and each block
// kind. (A seed past MaxInterfaces is 82 KB; TestPcapngTooManyInterfaces
// covers that bound, since the fuzzer stalls minimising inputs that size.)
func FuzzReader(f *testing.F) {
	frames := makeFrames(3)
	f.Add(encodeClassic(frames, binary.LittleEndian, false))
	f.Add(encodeClassic(frames, binary.BigEndian, true))
	f.Add(encodeNG(f, frames))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			var he *HeaderError
			var le *LinkTypeError
			if !errors.As(err, &he) && !errors.As(err, &le) {
				t.Fatalf("header: %T %v", err, err)
			}
			return
		}
		batch := frame.NewBatch(2, 512)
		for i := 0; ; i++ {
			n, err := r.ReadFrames(batch)
			for _, fr := range batch[:n] {
				if !supportedLinkType(fr.LinkType) {
					t.Fatalf("frame of unsupported link type %d", fr.LinkType)
				}
				if fr.N > len(fr.Buf) || fr.WireLen < fr.N {
					t.Fatalf("frame N %d WireLen %d slot %d", fr.N, fr.WireLen, len(fr.Buf))
				}
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				var re *RecordError
				if !errors.As(err, &re) || re.Record < 1 {
					t.Fatalf("record: %T %v", err, err)
				}
				return
			}
			if i > len(data) {
				t.Fatalf("more batches (%d) than input bytes", i)
			}
		}
	})
}
