//go:build !unix && !windows

package cputime

func process() int64 { return 0 }
