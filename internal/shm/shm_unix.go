//go:build linux || darwin

package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func createFile(path string, size int) (*Region, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shm: create region: %w", err)
	}
	r, err := sizeAndMap(f, size)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	r.path = path
	return r, nil
}

func sizeAndMap(f *os.File, size int) (*Region, error) {
	if err := f.Truncate(int64(size)); err != nil {
		return nil, fmt.Errorf("shm: size region: %w", err)
	}
	return mapFile(f, size)
}

// mapFile maps size bytes of f shared and read-write; the Region owns f.
func mapFile(f *os.File, size int) (*Region, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap region: %w", err)
	}
	return &Region{mem: mem, file: f, unmap: func() error { return unix.Munmap(mem) }}, nil
}

// dupFile returns a close-on-exec duplicate of f.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("shm: dup region: %w", err)
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}
