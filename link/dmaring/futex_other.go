//go:build !linux

package dmaring

import "time"

const futexSupported = false

// futexWait and futexWake are not used off Linux (RegionWakeups refuses);
// futexWait polls so that the code is total.
func futexWait(*Region, int, uint32) { time.Sleep(time.Millisecond) }

func futexWake(*Region, int) {}
