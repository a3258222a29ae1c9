package netstackunsafe

import (
	"reflect"
	"unsafe"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// Nanotime returns the runtime's monotonic clock in nanoseconds: what
// time.Now reads for its monotonic part, without the wall clock.
//
//go:linkname Nanotime runtime.nanotime
func Nanotime() int64

// monotonicIsNanoseconds reports whether tcpip.MonotonicTime is one int64
// of nanoseconds, as Monotonic assumes.
var monotonicIsNanoseconds = func() bool {
	t := reflect.TypeFor[tcpip.MonotonicTime]()
	return t.Kind() == reflect.Struct && t.NumField() == 1 && t.Field(0).Type.Kind() == reflect.Int64 &&
		t.Size() == unsafe.Sizeof(int64(0))
}()

// MonotonicAvailable reports whether Monotonic may be called: false when
// tcpip.MonotonicTime is no longer one int64 of nanoseconds.
func MonotonicAvailable() bool { return monotonicIsNanoseconds }

// Monotonic returns the tcpip.MonotonicTime of ns, a Nanotime reading.
// tcpip.MonotonicTime has no constructor from nanoseconds (its Add goes
// through time.Time), so the value is built in place. Call it only when
// MonotonicAvailable reports true.
func Monotonic(ns int64) tcpip.MonotonicTime {
	return *(*tcpip.MonotonicTime)(unsafe.Pointer(&ns))
}
