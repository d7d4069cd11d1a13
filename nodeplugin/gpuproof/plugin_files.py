#!/usr/bin/env python3
"""A claim's accounting files, written as the node plugin writes them when it
prepares a claim (nodeplugin/driver/prepare.go: accounting.WriteLimits and
accounting.Create of nodeplugin/shim/accounting), for make gpu-proof on a GPU
machine without Go.

The layout is read from nodeplugin/shim/include/gpuslice.h, the header the
shim and the Go package follow. make test holds these bytes to the Go
package's: TestPluginFilesMatchAccounting writes the same claim with both and
compares the files byte for byte, and reads the observation this module's
Observer writes with the Go package's reader.

  plugin_files.py write DIR --limit BYTES --share PCT [--created-ns N]
      writes DIR/gpuslice.limits and DIR/gpuslice.region
"""
import argparse
import fcntl
import mmap
import os
import re
import stat
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(os.path.dirname(HERE), "shim", "include", "gpuslice.h")

# The enforcer's sample period (nodeplugin/enforce.Period), which the plugin
# writes into every limits file.
SAMPLE_PERIOD_MS = 200

# Linux open-file-description lock commands (fcntl.h), and struct flock on
# 64-bit Linux: short type, short whence, off_t start, off_t len, pid_t pid.
F_OFD_SETLKW = 38
FLOCK = "hhqqi4x"


def read_layout(path=HEADER):
    """The #defines of gpuslice.h the files need: offsets, sizes, magics."""
    with open(path) as f:
        h = f.read()
    out = {}
    for name, val in re.findall(r"^#define GPUSLICE_(\w+) (0x[0-9a-fA-F]+|\d+)(?:ULL|u)?\b", h, re.M):
        out[name] = int(val, 0)
    out["REGION_SIZE"] = out["HEADER_SIZE"] + out["SLOT_SIZE"] * out["SLOT_COUNT"]
    out["LOCK_INIT"] = 1 << 30
    return out


L = read_layout()


def encode_limits(limit, share, created_ns, window_ms=None, sample_ms=SAMPLE_PERIOD_MS, overhead=None):
    """The limits structure without its observation (accounting.EncodeLimits
    of what prepare.go grants: no burst)."""
    window_ms = L["DEFAULT_COMPUTE_WINDOW_MS"] if window_ms is None else window_ms
    overhead = L["DEFAULT_CONTEXT_OVERHEAD"] if overhead is None else overhead
    b = bytearray(L["LIMITS_SIZE"])
    struct.pack_into("<QII", b, L["LIMITS_OFF_MAGIC"], L["LIMITS_MAGIC"], L["LIMITS_VERSION"], L["LIMITS_SIZE"])
    struct.pack_into("<Q", b, L["LIMITS_OFF_MEMORY_LIMIT"], limit)
    struct.pack_into("<I", b, L["LIMITS_OFF_COMPUTE_SHARE"], share)
    struct.pack_into("<I", b, L["LIMITS_OFF_COMPUTE_WINDOW_MS"], window_ms)
    struct.pack_into("<I", b, L["LIMITS_OFF_SAMPLE_PERIOD_MS"], sample_ms)
    struct.pack_into("<Q", b, L["LIMITS_OFF_CONTEXT_OVERHEAD"], overhead)
    struct.pack_into("<Q", b, L["LIMITS_OFF_CREATED_UNIX_NS"], created_ns)
    return bytes(b)


def encode_region(limit, share, created_ns, window_ms=None):
    """A fresh region (accounting.Encode, no burst)."""
    window_ms = L["DEFAULT_COMPUTE_WINDOW_MS"] if window_ms is None else window_ms
    b = bytearray(L["REGION_SIZE"])
    struct.pack_into("<QIIII", b, L["OFF_MAGIC"], L["REGION_MAGIC"], L["REGION_VERSION"], L["HEADER_SIZE"],
                     L["SLOT_SIZE"], L["SLOT_COUNT"])
    struct.pack_into("<Q", b, L["OFF_MEMORY_LIMIT"], limit)
    struct.pack_into("<I", b, L["OFF_COMPUTE_SHARE"], share)
    struct.pack_into("<Q", b, L["OFF_CREATED_UNIX_NS"], created_ns)
    struct.pack_into("<I", b, L["OFF_COMPUTE_WINDOW_MS"], window_ms)
    return bytes(b)


def open_claim_file(path, flags, mode):
    """As the plugin opens a claim's file: no symlink followed, no FIFO
    waited on, nothing but a regular file."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError("%s is not a regular file: something replaced it" % path)
    return fd


def write_limits(path, data):
    """accounting.WriteLimits: mode 0644, rewritten in place (the claim's
    containers have the file itself mounted), the observation left as it is,
    the magic written last."""
    fd = open_claim_file(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.fchmod(fd, 0o644)
        if os.fstat(fd).st_size < L["LIMITS_SIZE"]:
            os.ftruncate(fd, L["LIMITS_SIZE"])
        head = data[:L["LIMITS_OFF_OBSERVED_USED"]]
        os.pwrite(fd, head[8:], 8)
        os.pwrite(fd, head[:8], 0)
    finally:
        os.close(fd)


def create_region(path, data):
    """accounting.Create for a claim without a region: mode 0666 (every user
    of the claim's containers opens it), under the region's init lock, the
    magic written last."""
    fd = open_claim_file(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        os.fchmod(fd, 0o666)
        fcntl.fcntl(fd, F_OFD_SETLKW, struct.pack(FLOCK, fcntl.F_WRLCK, 0, L["LOCK_INIT"], 1, 0))
        if os.fstat(fd).st_size == 0:
            os.pwrite(fd, b"\0" * 8 + data[8:], 0)
            os.pwrite(fd, data[:8], 0)
    finally:
        os.close(fd)


def prepare(directory, limit, share, created_ns=None):
    """The claim's accounting directory as prepare.go makes it: the limits
    file, then the region. Returns the limits file's path."""
    created_ns = time.time_ns() if created_ns is None else created_ns
    os.makedirs(directory, mode=0o755, exist_ok=True)
    limits = os.path.join(directory, "gpuslice.limits")
    write_limits(limits, encode_limits(limit, share, created_ns))
    create_region(os.path.join(directory, "gpuslice.region"), encode_region(limit, share, created_ns))
    return limits


class Observer:
    """accounting.Observer: the enforcer's observation written into a limits
    file, under its sequence lock (odd while the two fields are written)."""

    def __init__(self, path):
        fd = open_claim_file(path, os.O_RDWR, 0)
        try:
            self.m = mmap.mmap(fd, L["LIMITS_SIZE"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        # 8-byte aligned stores through a memoryview are single moves on
        # x86-64 and arm64, as the shim reads them
        self.words = memoryview(self.m).cast("Q")

    def observe(self, used, t_ns):
        seq = L["LIMITS_OFF_OBSERVED_SEQ"] // 8
        self.words[seq] += 1
        self.words[L["LIMITS_OFF_OBSERVED_USED"] // 8] = used
        self.words[L["LIMITS_OFF_OBSERVED_UNIX_NS"] // 8] = t_ns
        self.words[seq] += 1

    def withdraw(self):
        """accounting.Observer.Withdraw: no enforcer observes the claim any
        more; the shim charges against the region's count alone."""
        self.observe(0, 0)

    def close(self):
        self.words.release()
        self.m.close()


def read_observation(path):
    """(observed_used, observed_seq) of a limits file."""
    with open(path, "rb") as f:
        b = f.read(L["LIMITS_SIZE"])
    return struct.unpack_from("<QQ", b, L["LIMITS_OFF_OBSERVED_USED"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write a claim's limits file and region into DIR")
    w.add_argument("dir")
    w.add_argument("--limit", type=int, required=True, help="memory limit in bytes")
    w.add_argument("--share", type=int, required=True, help="compute share in percent")
    w.add_argument("--created-ns", type=int, default=None, help="creation time (Unix ns); default now")
    o = sub.add_parser("observe", help="write one observation into a limits file")
    o.add_argument("file")
    o.add_argument("--used", type=int, required=True)
    o.add_argument("--at-ns", type=int, required=True)
    a = p.parse_args()
    if a.cmd == "write":
        prepare(a.dir, a.limit, a.share, a.created_ns)
    else:
        obs = Observer(a.file)
        obs.observe(a.used, a.at_ns)
        obs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
