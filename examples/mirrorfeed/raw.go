package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tickwire/tickwire/mirror"
)

// maxOpenRaw bounds the .bin files held open at once; past it every open
// file is flushed and closed, and reopened for appending when its flow
// delivers again, so a capture with thousands of flows cannot run out of
// descriptors.
const maxOpenRaw = 128

// rawWriter writes -raw output: per flow direction the delivered bytes
// (.bin) and the skipped holes (.gaps.json).
type rawWriter struct {
	dir      string
	open     openFunc
	dirs     map[mirror.FlowKey]*rawDirection
	sessions map[mirror.FlowKey]int // connections seen per key, for the file suffix
	nOpen    int                    // .bin files open
}

// openFunc opens a -raw output file with os.OpenFile's flags: openFile in
// the program, an in-memory file system in the fuzz tests.
type openFunc func(name string, flag int) (io.WriteCloser, error)

func openFile(name string, flag int) (io.WriteCloser, error) {
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return f, nil
}

type rawDirection struct {
	base     string // path without extension
	file     io.WriteCloser
	w        *bufio.Writer
	created  bool // the .bin exists (data was delivered)
	gaps     []gap
	gapsDone bool
}

type gap struct {
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
}

func newRawWriter(dir string) *rawWriter {
	return &rawWriter{dir: dir, open: openFile, dirs: map[mirror.FlowKey]*rawDirection{}, sessions: map[mirror.FlowKey]int{}}
}

// rawName returns "<srcIP>_<srcPort>-<dstIP>_<dstPort>", with ".N" added
// for the Nth connection on the same key (N > 1).
func rawName(k mirror.FlowKey, session int) string {
	ip := func(a [4]byte) string {
		return strconv.Itoa(int(a[0])) + "." + strconv.Itoa(int(a[1])) + "." + strconv.Itoa(int(a[2])) + "." + strconv.Itoa(int(a[3]))
	}
	name := ip(k.SrcIP) + "_" + strconv.Itoa(int(k.SrcPort)) + "-" + ip(k.DstIP) + "_" + strconv.Itoa(int(k.DstPort))
	if session > 1 {
		name += "." + strconv.Itoa(session)
	}
	return name
}

// start begins a direction. Nothing is written until it delivers data, so
// directions that carry none (pure ACKs) leave no files.
func (r *rawWriter) start(k mirror.FlowKey) {
	if _, ok := r.dirs[k]; ok {
		return
	}
	r.dirs[k] = &rawDirection{}
}

func (r *rawWriter) direction(k mirror.FlowKey) *rawDirection {
	d, ok := r.dirs[k]
	if !ok {
		d = &rawDirection{}
		r.dirs[k] = d
	}
	return d
}

func (r *rawWriter) data(k mirror.FlowKey, data []byte) error {
	d := r.direction(k)
	if d.file == nil {
		if !d.created {
			r.sessions[k]++
			d.base = filepath.Join(r.dir, rawName(k, r.sessions[k]))
		}
		if r.nOpen >= maxOpenRaw {
			if err := r.closeAll(); err != nil {
				return err
			}
		}
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if d.created {
			flags = os.O_WRONLY | os.O_APPEND
		}
		f, err := r.open(d.base+".bin", flags)
		if err != nil {
			return fmt.Errorf("-raw: %w", err)
		}
		d.file, d.w, d.created = f, bufio.NewWriterSize(f, 64<<10), true
		r.nOpen++
	}
	if _, err := d.w.Write(data); err != nil {
		return fmt.Errorf("-raw: %s.bin: %w", d.base, err)
	}
	return nil
}

// gap records a skipped hole; touching holes are merged into one.
func (r *rawWriter) gap(k mirror.FlowKey, offset, length uint64) {
	d := r.direction(k)
	if n := len(d.gaps); n > 0 && d.gaps[n-1].Offset+d.gaps[n-1].Length == offset {
		d.gaps[n-1].Length += length
		return
	}
	d.gaps = append(d.gaps, gap{offset, length})
}

// end finishes a direction: its .bin is closed and its .gaps.json written
// when it delivered data. A later connection on the same key starts afresh
// with the next file suffix.
func (r *rawWriter) end(k mirror.FlowKey) error {
	d, ok := r.dirs[k]
	if !ok {
		return nil
	}
	delete(r.dirs, k)
	return r.finishDirection(d)
}

func (r *rawWriter) finishDirection(d *rawDirection) error {
	err := r.closeFile(d)
	if !d.created || d.gapsDone {
		return err
	}
	d.gapsDone = true
	gaps := d.gaps
	if gaps == nil {
		gaps = []gap{} // [] in the file, never null
	}
	b, jerr := json.Marshal(gaps)
	if jerr == nil {
		jerr = r.writeFile(d.base+".gaps.json", append(b, '\n'))
	}
	if jerr != nil {
		jerr = fmt.Errorf("-raw: %w", jerr)
	}
	return errors.Join(err, jerr)
}

// writeFile writes a whole file, as os.WriteFile does.
func (r *rawWriter) writeFile(name string, b []byte) error {
	f, err := r.open(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

func (r *rawWriter) closeFile(d *rawDirection) error {
	if d.file == nil {
		return nil
	}
	err := errors.Join(d.w.Flush(), d.file.Close())
	d.file, d.w = nil, nil
	r.nOpen--
	if err != nil {
		return fmt.Errorf("-raw: %s.bin: %w", d.base, err)
	}
	return nil
}

func (r *rawWriter) closeAll() error {
	var err error
	for _, d := range r.dirs {
		err = errors.Join(err, r.closeFile(d))
	}
	return err
}

// close finishes every direction still open.
func (r *rawWriter) close() error {
	var err error
	for k, d := range r.dirs {
		err = errors.Join(err, r.finishDirection(d))
		delete(r.dirs, k)
	}
	return err
}
