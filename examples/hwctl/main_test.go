package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
)

func TestCommands(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("region files need mmap: Linux and macOS only")
	}
	feed, err := capgen.Generate(capgen.Options{Messages: 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "u50")
	tw, err := twin.New(twin.Config{Region: path, Input: feed.Source()})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev, err := hwoffload.Open(ctx, "twin:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitStatus(ctx, hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"regs"}, "0x0000 MAGIC                  0x31305754"},
		{[]string{"regs"}, "RING3_DROPPED"},
		{[]string{"counters"}, "trades 15\n"},
		{[]string{"ring", "0"}, "seq 0 flow 1 "},
		{[]string{"ring", "2"}, "flow start 10."},
	} {
		var b bytes.Buffer
		if err := run(&b, path, c.args, 4); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%v: no %q in\n%s", c.args, c.want, b.String())
		}
	}
	for _, args := range [][]string{nil, {"ring"}, {"ring", "4"}, {"poke"}} {
		if err := run(&bytes.Buffer{}, path, args, 4); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
