package accounting

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
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

// ErrUnusableRegion is returned by Create for an existing region it cannot
// read: what the claim's processes wrote, or another layout version.
var ErrUnusableRegion = errors.New("an unusable accounting region")

// ErrNotRegularFile is returned for a claim's region or limits file that is
// a symlink, a FIFO, a device or a directory.
var ErrNotRegularFile = errors.New("not a regular file")

// openClaimFile opens a file of a claim's accounting directory for the
// plugin, which runs on the host. The directory is bind-mounted writable
// into the claim's containers, so whatever a tenant put there must be
// taken for what it is: a symlink is not followed (it would reach the
// host's files from the host's side), a FIFO does not block the open, and
// anything but a regular file is refused.
func openClaimFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: %w (a symlink: something in the claim's containers replaced it)", path, ErrNotRegularFile)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s: something in the claim's containers replaced it)", path, ErrNotRegularFile, st.Mode().Type())
	}
	return f, nil
}

// ReadFile takes a consistent-per-field snapshot of the region at path (each
// 8-byte field is read atomically, as the library writes it) and reports
// which processes are still alive. It reads at most the bytes the region's
// geometry needs, within MaxRegionSize, whatever the file's size, and a file
// that shrinks while it is read is an error, not a crash: any process of the
// claim can write or truncate it.
func ReadFile(path string) (*Region, error) {
	f, err := openClaimFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() < 64 {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegion)
	}
	size := int(min(st.Size(), MaxRegionSize)) &^ 7
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	defer syscall.Munmap(m)
	b, err := copyMapped(m)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
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

// copyMapped copies the part of a mapped region its geometry needs, with
// atomic 8-byte loads. A page that vanished (the file was truncated after it
// was mapped) faults; the fault becomes an error instead of ending the
// process.
func copyMapped(m []byte) (b []byte, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("the file changed size while it was read: %v", r)
		}
	}()
	load := func(off int) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&m[off]))) }
	n := min(len(m), HeaderSize)
	g1, g2 := load(offHeaderSize-4), load(offSlotSize) // version|header_size, slot_size|slot_count
	hdr, slot, count := uint64(uint32(g1>>32)), uint64(uint32(g2)), uint64(uint32(g2>>32))
	if hdr <= MaxHeaderSize && slot <= MaxSlotSize && count <= MaxSlotCount {
		n = int(min(uint64(len(m)), max(uint64(n), hdr+slot*count))) &^ 7
	}
	b = make([]byte, n)
	for off := 0; off < n; off += 8 {
		*(*uint64)(unsafe.Pointer(&b[off])) = load(off)
	}
	return b, nil
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
	f, err := openClaimFile(path, os.O_RDWR|os.O_CREATE, 0o666)
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
		return fmt.Errorf("%s exists: %w: %v", path, ErrUnusableRegion, err)
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

// WriteLimits writes the claim's limits file at path, creating it (mode
// 0644: every user of the claim's containers reads it) or rewriting an
// existing one in place, never by rename: the claim's containers have the
// file itself bind-mounted, and a new inode would not reach them. The
// observation fields are left as they are (zero in a new file).
func WriteLimits(path string, l Limits) error {
	if err := l.validate(); err != nil {
		return fmt.Errorf("write limits %s: %w", path, err)
	}
	f, err := openClaimFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("write limits: %w", err)
	}
	defer f.Close()
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write limits: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("write limits: %w", err)
	}
	if st.Size() < LimitsSize {
		if err := f.Truncate(LimitsSize); err != nil {
			return fmt.Errorf("write limits: %w", err)
		}
	}
	b := EncodeLimits(l)[:limOffObservedUsed]
	// the magic last: a reader that sees it sees the whole structure
	if _, err := f.WriteAt(b[8:], 8); err != nil {
		return fmt.Errorf("write limits: %w", err)
	}
	if _, err := f.WriteAt(b[:8], 0); err != nil {
		return fmt.Errorf("write limits: %w", err)
	}
	return nil
}

// ReadLimits reads the limits file at path.
func ReadLimits(path string) (Limits, error) {
	f, err := openClaimFile(path, os.O_RDONLY, 0)
	if err != nil {
		return Limits{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return Limits{}, fmt.Errorf("read %s: %w", path, err)
	}
	l, err := DecodeLimits(b)
	if err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Observer writes the plugin's observations into one claim's limits file,
// mapped for as long as the claim is watched.
type Observer struct {
	m []byte
}

// OpenObserver maps the limits file at path for observations.
func OpenObserver(path string) (*Observer, error) {
	f, err := openClaimFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, LimitsSize)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if _, err := DecodeLimits(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, LimitsSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return &Observer{m: m}, nil
}

// Observe records that the claim's processes held used bytes when the
// sample that measured them began, at t. The sequence number is a sequence
// lock: odd while the two fields are written, so a reader never pairs an
// amount with another observation's time.
func (o *Observer) Observe(used uint64, t time.Time) {
	seq := o.word(limOffObservedSeq)
	atomic.AddUint64(seq, 1)
	atomic.StoreUint64(o.word(limOffObservedUsed), used)
	atomic.StoreUint64(o.word(limOffObservedUnixNS), uint64(t.UnixNano()))
	atomic.AddUint64(seq, 1)
}

// Withdraw records that no enforcer observes the claim any more (the
// plugin is stopping): an observation left behind would hold the claim's
// processes to memory freed after it for as long as no plugin runs, so the
// shim charges against the region's count alone until the next one.
func (o *Observer) Withdraw() {
	seq := o.word(limOffObservedSeq)
	atomic.AddUint64(seq, 1)
	atomic.StoreUint64(o.word(limOffObservedUsed), 0)
	atomic.StoreUint64(o.word(limOffObservedUnixNS), 0)
	atomic.AddUint64(seq, 1)
}

func (o *Observer) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&o.m[off])) }

// Close unmaps the file.
func (o *Observer) Close() error { return syscall.Munmap(o.m) }
