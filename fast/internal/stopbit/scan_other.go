//go:build !amd64

package stopbit

// useKernel is false: there is no kernel for this architecture.
var useKernel = false

func scanKernel(b []byte, off int, t *Tokens) (int, bool) { return scanGo(b, off, t) }

// scanAVX2 is never called here (useKernel is false); it finds nothing.
func scanAVX2(b *byte, n, off int, t *Tokens) (count int, full bool) { return 0, false }
