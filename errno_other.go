//go:build !linux

package tickwire

import "syscall"

// errnoNoNet is the errno for netstack's ErrNoNet ("machine is not on the
// network", an ICMP "source host isolated" on a connection). ENONET is
// Linux's: Darwin's syscall package has no such errno, and BSD kernels
// (Darwin's included) report that ICMP error as EHOSTUNREACH, which is what
// a program written for those systems checks for. Windows has no ENONET
// either (Go's syscall.ENONET there is an invented value no Windows call
// returns), so it gets EHOSTUNREACH too.
const errnoNoNet = syscall.EHOSTUNREACH
