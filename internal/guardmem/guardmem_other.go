//go:build !unix

package guardmem

import "testing"

func guarded(tb testing.TB, _ int, _ bool) []byte {
	tb.Skip("guardmem: no guard pages on this system")
	return nil
}
