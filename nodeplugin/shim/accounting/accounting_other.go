//go:build !linux

package accounting

import (
	"errors"
	"os"
	"time"
)

// The library and its locks exist only on Linux; Decode works everywhere.
var errLinuxOnly = errors.New("accounting regions are only used on Linux")

// ReadFile is available on Linux only.
func ReadFile(path string) (*Region, error) { return nil, errLinuxOnly }

// Create is available on Linux only.
func Create(path string, limit uint64, share uint32, burst bool, window time.Duration) error {
	return errLinuxOnly
}

// HoldPresence is available on Linux only.
func HoldPresence(f *os.File) error { return errLinuxOnly }
