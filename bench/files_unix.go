//go:build unix

package main

import "syscall"

// openFiles raises the process's open-file limit toward n, the hard limit
// too when it is lower (root with CAP_SYS_RESOURCE), and returns the limit
// it ends with.
func openFiles(n int) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return n // cannot tell: try
	}
	if lim.Cur >= uint64(n) {
		return int(lim.Cur)
	}
	want := lim
	want.Cur = uint64(n)
	want.Max = max(lim.Max, want.Cur)
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
		return n
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
			syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		}
	}
	return int(min(lim.Cur, uint64(n)))
}
