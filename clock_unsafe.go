package tickwire

import (
	"reflect"
	"unsafe"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// netstack reads its clock's NowMonotonic several times per segment (receive
// time, RTT sample, send time, timers). tcpip.NewStdClock derives it from
// time.Since, which reads the wall clock too and converts through time.Time
// (about 6% of a latency-mode round trip). monoClock reads the runtime's
// monotonic clock alone. tcpip.MonotonicTime has no constructor from
// nanoseconds but Add, which also goes through time.Time, so the value is
// built in place: its layout (one int64 of nanoseconds) is checked when the
// package loads, and the standard clock is used if it ever changes.

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// monotonicIsNanoseconds reports whether tcpip.MonotonicTime is one int64.
var monotonicIsNanoseconds = func() bool {
	t := reflect.TypeFor[tcpip.MonotonicTime]()
	return t.Kind() == reflect.Struct && t.NumField() == 1 && t.Field(0).Type.Kind() == reflect.Int64 &&
		t.Size() == unsafe.Sizeof(int64(0))
}()

// monoClock is netstack's standard clock with a cheaper NowMonotonic.
type monoClock struct {
	tcpip.Clock // Now and AfterFunc
}

// NowMonotonic implements tcpip.Clock.NowMonotonic.
func (monoClock) NowMonotonic() tcpip.MonotonicTime {
	ns := nanotime()
	return *(*tcpip.MonotonicTime)(unsafe.Pointer(&ns))
}

// newClock returns the clock a Stack gives netstack.
func newClock() tcpip.Clock {
	std := tcpip.NewStdClock()
	if !monotonicIsNanoseconds {
		return std
	}
	return monoClock{std}
}
