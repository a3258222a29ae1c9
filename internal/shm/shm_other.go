//go:build !linux && !darwin

package shm

import "os"

func createFile(path string, size int) (*Region, error)  { return nil, ErrNotSupported }
func createMemfd(name string, size int) (*Region, error) { return nil, ErrNotSupported }
func mapFile(f *os.File, size int) (*Region, error)      { return nil, ErrNotSupported }
func dupFile(f *os.File) (*os.File, error)               { return nil, ErrNotSupported }
