//go:build !purego && !linux

package fast

import (
	"math/rand/v2"
	"testing"
)

// guardedStream needs mmap and mprotect: only Linux runs it
// (tape_asm_guard_linux_amd64_test.go).
func guardedStream(t *testing.T, r *rand.Rand, ts *Templates, opts *DecoderOptions, stream []byte) {}

type guardedDecoders struct{}

func newGuardedDecoders(t testing.TB, ts *Templates, opts *DecoderOptions, maxLen int) *guardedDecoders {
	return nil
}

func (g *guardedDecoders) stream(t *testing.T, r *rand.Rand, stream []byte) {}
