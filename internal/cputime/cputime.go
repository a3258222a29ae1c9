// Package cputime reads the process's CPU time, for benchmarks that report
// CPU nanoseconds beside wall-clock ones: on a machine shared with other
// work, wall-clock time per op includes waiting for a core, CPU time does
// not.
//
//	start := cputime.Process()
//	... // b.N iterations
//	if start > 0 {
//		b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
//	}
package cputime

// Process returns the process's user plus system CPU time in nanoseconds, or
// 0 where the system does not say (a caller then reports no CPU figure).
func Process() int64 { return process() }
