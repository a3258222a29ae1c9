// Command fastgen generates a typed, allocation-free FAST decoder and encoder
// in Go from a FAST 1.1 template XML file (see package
// github.com/tickwire/tickwire/fast/cmd/fastgen/gen for what it supports).
//
// Usage:
//
//	fastgen -in templates.xml -pkg sse -out sse_gen.go
//
// It is meant for go:generate lines, e.g. in fast/sse:
//
//	//go:generate go run ../cmd/fastgen -in templates.xml -pkg sse -out sse_gen.go
//
// For a package outside module github.com/tickwire/tickwire add -external:
// the generated code then does without the token path, which uses an
// internal package of the module.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/cmd/fastgen/gen"
)

func main() {
	in := flag.String("in", "", "template XML file")
	pkg := flag.String("pkg", "", "package name of the generated file")
	out := flag.String("out", "", "output Go file (default: standard output)")
	external := flag.Bool("external", false, "generate for a package outside module github.com/tickwire/tickwire (no token path)")
	flag.Parse()
	if err := run(*in, *pkg, *out, *external); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in, pkg, out string, external bool) error {
	if in == "" || pkg == "" {
		return fmt.Errorf("fastgen: -in and -pkg are required")
	}
	ts, err := fast.LoadTemplatesFile(in)
	if err != nil {
		return err
	}
	src, err := gen.Generate(ts, gen.Options{Package: pkg, Source: filepath.Base(in), External: external})
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(src)
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
