package accounting

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Linux open-file-description lock commands (not in package syscall).
const (
	fOFDGetLk  = 36
	fOFDSetLk  = 37
	fOFDSetLkW = 38
)

// ReadFile takes a consistent-per-field snapshot of the region at path (each
// 8-byte field is read atomically, as the library writes it) and reports
// which processes are still alive.
func ReadFile(path string) (*Region, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := int(st.Size()) &^ 7
	if size < 64 {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegion)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	defer syscall.Munmap(m)
	b := make([]byte, size)
	for off := 0; off < size; off += 8 {
		v := atomic.LoadUint64((*uint64)(unsafe.Pointer(&m[off])))
		*(*uint64)(unsafe.Pointer(&b[off])) = v
	}
	r, err := Decode(b)
	if err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	for i := range r.Processes {
		r.Processes[i].Alive, err = locked(f, LockSlot0+int64(r.Processes[i].Slot))
		if err != nil {
			return r, fmt.Errorf("%s: %w", path, err)
		}
	}
	return r, nil
}

// locked reports whether another open file description holds a lock on the
// byte at off.
func locked(f *os.File, off int64) (bool, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: off, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), fOFDGetLk, &lk); err != nil {
		return false, fmt.Errorf("test lock: %w", err)
	}
	return lk.Type != syscall.F_UNLCK, nil
}

// Create makes the region at path for a claim, if it does not exist yet, so
// that the limits hold even for processes that lose the environment. An
// existing version-1 region is left as it is; an unusable one is an error
// (the library reinitialises it once no process is attached).
func Create(path string, limit uint64, share uint32, burst bool, window time.Duration) error {
	if limit == 0 || share == 0 || share > 100 || window <= 0 {
		return fmt.Errorf("create %s: limit %d, share %d%%, window %v: invalid", path, limit, share, window)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	defer f.Close()
	// every container user of the claim must be able to open it
	if err := f.Chmod(0o666); err != nil {
		return err
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Start: LockInit, Len: 1}
	for {
		err = syscall.FcntlFlock(f.Fd(), fOFDSetLkW, &lk)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		b := Encode(limit, share, burst, window, time.Now())
		magic := append([]byte(nil), b[:8]...)
		clear(b[:8]) // the magic last: a reader that sees it sees a whole header
		if _, err := f.WriteAt(b, 0); err != nil {
			return err
		}
		if _, err := f.WriteAt(magic, 0); err != nil {
			return err
		}
		return nil
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return err
	}
	if _, err := Decode(b); err != nil {
		return fmt.Errorf("%s exists: %w", path, err)
	}
	return nil
}

// HoldPresence takes the shared presence lock on an open region file, as an
// attached process holds it; the lock lasts until f is closed. Tests use it to
// stand in for a process of another library version.
func HoldPresence(f *os.File) error {
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Start: LockPresence, Len: 1}
	return syscall.FcntlFlock(f.Fd(), fOFDSetLk, &lk)
}
