package main

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzParseParams feeds arbitrary parameter objects to the parser: no
// panic, and an accepted object always yields a test the server can run
// within its bounds.
func FuzzParseParams(f *testing.F) {
	f.Add([]byte(`{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseParams(b)
		if err != nil {
			var pe *ParamError
			if errors.As(err, &pe) && pe.Code == 0 {
				t.Fatalf("ParamError without an iperf3 code: %v", err)
			}
			return
		}
		if p.Parallel < 1 || p.Parallel > MaxStreams || p.BlockSize < 1 || p.BlockSize > MaxBlockSize {
			t.Fatalf("accepted out-of-bounds parameters %+v from %q", p, b)
		}
		if p.UDP && p.BlockSize < udpHeaderSize(p.Counters64) {
			t.Fatalf("UDP block %d too small for the header", p.BlockSize)
		}
	})
}

// FuzzReadJSON reads arbitrary control-connection bytes as a framed JSON
// message: no panic, never more than maxJSON bytes returned.
func FuzzReadJSON(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := readJSON(bytes.NewReader(b))
		if err == nil && (len(body) > maxJSON || len(body) > len(b)) {
			t.Fatalf("returned %d bytes from %d", len(body), len(b))
		}
	})
}

// FuzzUDPReceiver accounts arbitrary datagrams: no panic, and the byte
// count is exact.
func FuzzUDPReceiver(f *testing.F) {
	f.Add([]byte("\x65\x5f\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01payload"), false)
	f.Fuzz(func(t *testing.T, d []byte, counters64 bool) {
		var r udpReceiver
		r.add(d, time.Unix(1_700_000_000, 0), counters64)
		r.add(d, time.Unix(1_700_000_001, 0), counters64)
		if r.bytes != 2*uint64(len(d)) {
			t.Fatalf("bytes %d after two datagrams of %d", r.bytes, len(d))
		}
	})
}
