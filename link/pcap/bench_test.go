package pcap

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/frame"
)

// benchFile is a capture of n 1408-byte-payload TCP-sized frames.
func benchFile(b *testing.B, n int, ng bool) []byte {
	frames := make([]testFrame, n)
	data := make([]byte, 14+20+20+1408)
	for i := range frames {
		frames[i] = testFrame{ts: int64(i) * 1000, data: data, wireLen: len(data)}
	}
	if ng {
		return encodeNG(b, frames)
	}
	return encodeClassic(frames, binary.LittleEndian, true)
}

func BenchmarkReadFrames(b *testing.B) {
	for _, c := range []struct {
		name string
		ng   bool
	}{{"pcap", false}, {"pcapng", true}} {
		b.Run(c.name, func(b *testing.B) {
			file := benchFile(b, 4096, c.ng)
			batch := frame.NewBatch(64, 2048)
			b.SetBytes(int64(len(file)))
			b.ReportAllocs()
			for range b.N {
				r, err := NewReader(bytes.NewReader(file))
				if err != nil {
					b.Fatal(err)
				}
				for {
					_, err := r.ReadFrames(batch)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func BenchmarkWriteFrame(b *testing.B) {
	w, err := NewWriter(io.Discard, layers.LinkTypeEthernet, 0)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 1462)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := range b.N {
		if err := w.WriteFrame(int64(i), data, 0); err != nil {
			b.Fatal(err)
		}
	}
}
