package cputime

import "syscall"

func process() int64 {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var creation, exit, kernel, user syscall.Filetime
	if syscall.GetProcessTimes(h, &creation, &exit, &kernel, &user) != nil {
		return 0
	}
	return filetimeNanos(kernel) + filetimeNanos(user)
}

// filetimeNanos converts a FILETIME that holds a duration (a count of 100 ns
// intervals, not a date: Filetime.Nanoseconds would subtract the 1601 epoch).
func filetimeNanos(ft syscall.Filetime) int64 {
	return (int64(ft.HighDateTime)<<32 | int64(ft.LowDateTime)) * 100
}
