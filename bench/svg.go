package main

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"
)

// writePlots writes dir/<measure>.svg for every latency measure that ran.
func writePlots(dir string, results []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, r := range results {
		if r.skipped != "" || len(r.tickwireLat) == 0 {
			continue
		}
		var b bytes.Buffer
		err := writeCDF(&b, r.Name+": latency CDF", []series{
			{name: "tickwire", color: "#d62728", sorted: r.tickwireLat},
			{name: r.BaselineName, color: "#1f77b4", sorted: r.baselineLat},
		})
		if err != nil {
			return fmt.Errorf("%s: %w", r.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, r.Name+".svg"), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// series is one curve: latencies in increasing order.
type series struct {
	name, color string
	sorted      []time.Duration
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH                       = 900, 460
	marginL, marginR, marginT, marginB = 70, 40, 40, 110
	plotPoints                         = 600 // quantiles drawn per curve
)

// writeCDF draws the empirical CDFs of the series on a log-scaled latency
// axis (microseconds), with axes, grid, tick labels and a legend giving
// each curve's p50, p99 and p99.9.
func writeCDF(w io.Writer, title string, ss []series) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		if len(s.sorted) == 0 {
			return fmt.Errorf("series %q is empty", s.name)
		}
		lo = math.Min(lo, micros(s.sorted[0]))
		// The far tail (a scheduler hiccup of a shared machine) would
		// squeeze the interesting part; the legend gives the maximum.
		hi = math.Max(hi, micros(percentile(s.sorted, 0.9999)))
	}
	lo = math.Max(lo, 0.001) // log axis: clamp zero durations
	hi = math.Max(hi, lo*10)
	// Whole decades, so tick labels are round numbers.
	xmin := math.Pow(10, math.Floor(math.Log10(lo)))
	xmax := math.Pow(10, math.Ceil(math.Log10(hi)))
	innerW := float64(plotW - marginL - marginR)
	innerH := float64(plotH - marginT - marginB)
	x := func(us float64) float64 {
		us = math.Max(us, xmin)
		return marginL + innerW*(math.Log10(us)-math.Log10(xmin))/(math.Log10(xmax)-math.Log10(xmin))
	}
	y := func(q float64) float64 { return marginT + innerH*(1-q) }

	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="24" font-size="15" text-anchor="middle">%s</text>`+"\n", plotW/2, html.EscapeString(title))

	// Grid and ticks: 1, 2, 5 per decade on x (decades only when there are
	// many); tenths on y.
	steps := []float64{1, 2, 5}
	if math.Log10(xmax/xmin) > 3.5 {
		steps = steps[:1]
	}
	for d := xmin; d < xmax*1.001; d *= 10 {
		for _, m := range steps {
			v := d * m
			if v > xmax*1.001 {
				break
			}
			gx := x(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", gx, y(0), gx, y(1), stroke)
			p(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", gx, y(0)+16, tickLabel(v))
		}
	}
	for i := 0; i <= 10; i++ {
		q := float64(i) / 10
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x(xmin), y(q), x(xmax), y(q))
		p(`<text x="%d" y="%.1f" text-anchor="end">%.1f</text>`+"\n", marginL-6, y(q)+4, q)
	}
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(xmin), y(0), x(xmax), y(0))
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(xmin), y(0), x(xmin), y(1))
	p(`<text x="%.1f" y="%.1f" text-anchor="middle">latency (us, log scale)</text>`+"\n", marginL+innerW/2, y(0)+36)
	p(`<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">fraction of samples at or below</text>`+"\n", marginT+innerH/2)

	for i, s := range ss {
		p(`<polyline fill="none" stroke="%s" stroke-width="1.8" points="`, s.color)
		n := len(s.sorted)
		for k := 0; k <= plotPoints; k++ {
			q := float64(k) / plotPoints
			idx := min(n-1, int(q*float64(n-1)))
			p("%.1f,%.1f ", x(math.Min(micros(s.sorted[idx]), xmax)), y(float64(idx+1)/float64(n)))
		}
		p("\"/>\n")
		ly := float64(plotH-marginB) + 56 + float64(i)*20
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", marginL, ly-4, marginL+24, ly-4, s.color)
		p(`<text x="%d" y="%.1f">%s: p50 %s us, p99 %s us, p99.9 %s us, max %s us, %d samples</text>`+"\n", marginL+32, ly,
			html.EscapeString(s.name), num(micros(percentile(s.sorted, 0.5))), num(micros(percentile(s.sorted, 0.99))),
			num(micros(percentile(s.sorted, 0.999))), num(micros(s.sorted[n-1])), n)
	}
	p("</svg>\n")
	return nil
}

func tickLabel(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%gs", us/1e6)
	case us >= 1000:
		return fmt.Sprintf("%gms", us/1000)
	default:
		return fmt.Sprintf("%g", us)
	}
}
