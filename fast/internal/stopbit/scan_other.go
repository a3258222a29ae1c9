//go:build !amd64

package stopbit

// useKernel is false: there is no kernel for this architecture.
var useKernel = false

func scanKernel(b []byte, off int, t *Tokens) (int, bool) { return scanGo(b, off, t) }
