#!/usr/bin/env python3
"""NVML for make gpu-proof, on a GPU machine without Go: the node plugin's
discovery (nodeplugin/discovery.Discover), the processes its accounting and
enforcer see, MIG mode and the GPU's utilisation, read through the same
libnvidia-ml.so.1 calls as go-nvml makes.

It loads the library with ctypes (Python's standard library), so the same
code runs on a real driver and on the simulated one of nodeplugin/shim/fake,
where nvidia-ml-py is not installed. make test holds discover() to the node
plugin's own: TestDiscoveryMatchesNodePlugin runs both on the simulated GPU
and compares every field.

  nvml.py discover     the discovered GPUs and those passed over, as JSON;
                       each GPU's memory is the v2 total less the driver's
                       reserve where the library has the v2 call, else the
                       v1 total, and memorySource says which (nvml_v2,
                       nvml_v1), as the plugin publishes it
  nvml.py gpu          GPU 0: name, UUID, driver and CUDA versions, memory
                       (v1, and v2 with the driver's reserve), MIG mode and
                       instances, compute processes, utilisation, as JSON
"""
import ctypes
import json
import sys

SUCCESS = 0
ERROR_NOT_SUPPORTED = 3
ERROR_INSUFFICIENT_SIZE = 7
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_ARGUMENT_VERSION_MISMATCH = 25
DEVICE_MIG_ENABLE = 1

# Where discovery read a GPU's memory: contract.MemorySourceNVMLv2 / v1.
MEMORY_NVML_V2 = "nvml_v2"
MEMORY_NVML_V1 = "nvml_v1"

# nvmlDeviceArchitecture_t, named as nodeplugin/discovery.ArchitectureName
ARCHITECTURES = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere", 8: "Ada",
                 9: "Hopper", 10: "Blackwell"}

c_uint, c_ull = ctypes.c_uint, ctypes.c_ulonglong


class Memory(ctypes.Structure):
    _fields_ = [("total", c_ull), ("free", c_ull), ("used", c_ull)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", c_uint), ("total", c_ull), ("reserved", c_ull), ("free", c_ull), ("used", c_ull)]


class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", c_uint), ("bus", c_uint), ("device", c_uint),
                ("pciDeviceId", c_uint), ("pciSubSystemId", c_uint), ("busId", ctypes.c_char * 32)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t, what the _v3 lists fill
    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ull), ("gpuInstanceId", c_uint), ("computeInstanceId", c_uint)]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class NVMLError(Exception):
    def __init__(self, what, ret, text):
        super().__init__("%s: %s (NVML return %d)" % (what, text, ret))
        self.ret = ret


class NVML:
    """One initialised libnvidia-ml.so.1 (the one the dynamic linker finds,
    as go-nvml's default)."""

    def __init__(self, path="libnvidia-ml.so.1"):
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise NVMLError("load %s" % path, -1, "%s; is the NVIDIA driver installed?" % e)
        self.lib.nvmlErrorString.restype = ctypes.c_char_p
        self.call("initialise NVML", "nvmlInit_v2")

    def text(self, ret):
        return self.lib.nvmlErrorString(ret).decode(errors="replace")

    def ret(self, fn, *args):
        return getattr(self.lib, fn)(*args)

    def call(self, what, fn, *args):
        r = self.ret(fn, *args)
        if r != SUCCESS:
            raise NVMLError(what, r, self.text(r))

    def shutdown(self):
        self.lib.nvmlShutdown()

    def driver_version(self):
        buf = ctypes.create_string_buffer(80)
        self.call("read the NVIDIA driver version", "nvmlSystemGetDriverVersion", buf, 80)
        return buf.value.decode()

    def cuda_version(self):
        """The CUDA version the driver supports, "12.4"; "" if unreadable."""
        v = ctypes.c_int()
        if self.ret("nvmlSystemGetCudaDriverVersion", ctypes.byref(v)) != SUCCESS:
            return ""
        return "%d.%d" % (v.value // 1000, v.value % 1000 // 10)

    def count(self):
        n = c_uint()
        self.call("count GPUs", "nvmlDeviceGetCount_v2", ctypes.byref(n))
        return n.value

    def handle(self, index):
        h = ctypes.c_void_p()
        self.call("get the handle of GPU %d" % index, "nvmlDeviceGetHandleByIndex_v2", c_uint(index), ctypes.byref(h))
        return h

    def handle_by_uuid(self, uuid):
        h = ctypes.c_void_p()
        self.call("find GPU %s" % uuid, "nvmlDeviceGetHandleByUUID", uuid.encode(), ctypes.byref(h))
        return h

    def string(self, fn, h):
        buf = ctypes.create_string_buffer(96)
        return self.ret(fn, h, buf, 96), buf.value.decode(errors="replace")

    def memory(self, h):
        m = Memory()
        return self.ret("nvmlDeviceGetMemoryInfo", h, ctypes.byref(m)), m

    def has(self, fn):
        """Whether the library exports fn (go-nvml's LookupSymbol)."""
        return hasattr(self.lib, fn)

    def memory_v2_info(self, h):
        """(return, MemoryV2); call only where has() the symbol."""
        m = MemoryV2(version=ctypes.sizeof(MemoryV2) | 2 << 24)
        return self.ret("nvmlDeviceGetMemoryInfo_v2", h, ctypes.byref(m)), m

    def memory_v2(self, h):
        """(total, reserved) by the v2 memory info; None where the driver
        lacks it."""
        if not self.has("nvmlDeviceGetMemoryInfo_v2"):
            return None
        r, m = self.memory_v2_info(h)
        return (m.total, m.reserved) if r == SUCCESS else None

    def mig_mode(self, h):
        """(current, pending), or None on a GPU without MIG."""
        cur, pend = c_uint(), c_uint()
        r = self.ret("nvmlDeviceGetMigMode", h, ctypes.byref(cur), ctypes.byref(pend))
        if r == ERROR_NOT_SUPPORTED:
            return None
        if r != SUCCESS:
            raise NVMLError("read the MIG mode", r, self.text(r))
        return cur.value, pend.value

    def mig_devices(self, h):
        """The MIG devices of a GPU in MIG mode: (uuid, name, memory bytes)."""
        n = c_uint()
        self.call("count the MIG devices", "nvmlDeviceGetMaxMigDeviceCount", h, ctypes.byref(n))
        out = []
        for i in range(n.value):
            m = ctypes.c_void_p()
            if self.ret("nvmlDeviceGetMigDeviceHandleByIndex", h, c_uint(i), ctypes.byref(m)) != SUCCESS:
                continue  # an index with no instance behind it
            r1, uuid = self.string("nvmlDeviceGetUUID", m)
            r2, name = self.string("nvmlDeviceGetName", m)
            r3, mem = self.memory(m)
            if SUCCESS == r1 == r2 == r3:
                out.append((uuid, name, mem.total))
        return out

    def processes(self, h):
        """[(pid, used bytes)] of the compute processes NVML lists on a GPU."""
        n = c_uint(0)
        while True:
            buf = (ProcessInfo * max(n.value, 1))()
            r = self.ret("nvmlDeviceGetComputeRunningProcesses_v3", h, ctypes.byref(n), buf)
            if r == ERROR_INSUFFICIENT_SIZE:
                n = c_uint(n.value + 8)  # more may have started since
                continue
            if r != SUCCESS:
                raise NVMLError("list the compute processes", r, self.text(r))
            return [(buf[i].pid, buf[i].usedGpuMemory) for i in range(n.value)]

    def utilization(self, h):
        """The GPU's utilisation in percent over the driver's last sample
        period; None where it is not supported (MIG mode)."""
        u = Utilization()
        r = self.ret("nvmlDeviceGetUtilizationRates", h, ctypes.byref(u))
        return u.gpu if r == SUCCESS else None


def read_memory(nv, h):
    """nodeplugin/discovery's readMemory: (usable bytes, source, error). The
    v2 total less what the driver reserves where the library has the v2
    call, v1's total where it does not or the driver does not support it; a
    library without the symbol is never called through it."""
    if nv.has("nvmlDeviceGetMemoryInfo_v2"):
        r, m = nv.memory_v2_info(h)
        if r == SUCCESS:
            if m.reserved >= m.total:
                return 0, "", "NVML's v2 memory info reserves %d of %d bytes: nothing is left for slices" % (m.reserved, m.total)
            return m.total - m.reserved, MEMORY_NVML_V2, None
        if r not in (ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, ERROR_ARGUMENT_VERSION_MISMATCH):
            return 0, "", "read memory (v2): %s" % nv.text(r)
    r, m = nv.memory(h)
    if r != SUCCESS:
        return 0, "", "read memory: %s" % nv.text(r)
    return m.total, MEMORY_NVML_V1, None


def read_gpu(nv, index):
    """One GPU as nodeplugin/discovery's read; (gpu, error)."""
    g = {"index": index, "uuid": ""}
    try:
        h = nv.handle(index)
    except NVMLError as e:
        return g, "get handle: %s" % e
    errs = []

    def check(what, r):
        if r != SUCCESS:
            errs.append("read %s: %s" % (what, nv.text(r)))

    r, g["uuid"] = nv.string("nvmlDeviceGetUUID", h)
    check("UUID", r)
    r, g["name"] = nv.string("nvmlDeviceGetName", h)
    check("name", r)
    g["memoryBytes"], g["memorySource"], err = read_memory(nv, h)
    if err:
        errs.append(err)
    major, minor = ctypes.c_int(), ctypes.c_int()
    check("compute capability", nv.ret("nvmlDeviceGetCudaComputeCapability", h, ctypes.byref(major), ctypes.byref(minor)))
    g["ccMajor"], g["ccMinor"] = major.value, minor.value
    arch = c_uint()
    check("architecture", nv.ret("nvmlDeviceGetArchitecture", h, ctypes.byref(arch)))
    g["architecture"] = ARCHITECTURES.get(arch.value, "Unknown")
    pci = PciInfo()
    check("PCI info", nv.ret("nvmlDeviceGetPciInfo_v3", h, ctypes.byref(pci)))
    g["pciBusId"] = pci.busId.decode(errors="replace").lower()
    m = c_uint()
    check("minor number", nv.ret("nvmlDeviceGetMinorNumber", h, ctypes.byref(m)))
    g["minor"] = m.value
    if errs:
        return g, "\n".join(errs)  # as errors.Join
    if g["memoryBytes"] == 0:
        return g, "NVML reports 0 bytes of memory"
    try:
        mode = nv.mig_mode(h)
    except NVMLError:
        mode = None
    g["migEnabled"] = bool(mode and mode[0] == DEVICE_MIG_ENABLE)
    return g, None


def discover(nv):
    """nodeplugin/discovery.Discover, without the MIG instances' details
    (the proof reads those itself): {"gpus": [...], "skipped": [...]}."""
    driver = nv.driver_version()
    cuda = nv.cuda_version()
    out = {"gpus": [], "skipped": []}
    for i in range(nv.count()):
        g, err = read_gpu(nv, i)
        if err:
            out["skipped"].append({"Index": i, "UUID": g["uuid"], "Reason": err})
            continue
        g["driverVersion"], g["cudaDriverVersion"] = driver, cuda
        out["gpus"].append(g)
    return out


def gpu(nv, index=0):
    """What the proof reports of one GPU, and checks before it measures."""
    h = nv.handle(index)
    _, name = nv.string("nvmlDeviceGetName", h)
    _, uuid = nv.string("nvmlDeviceGetUUID", h)
    r, mem = nv.memory(h)
    v2 = nv.memory_v2(h)
    mode = nv.mig_mode(h)
    if mode is None:
        mig = "not supported"
    else:
        mig = "enabled" if mode[0] == DEVICE_MIG_ENABLE else "disabled"
        if mode[0] != mode[1]:
            mig += " (pending %s)" % ("enabled" if mode[1] == DEVICE_MIG_ENABLE else "disabled")
    migs = nv.mig_devices(h) if mode and mode[0] == DEVICE_MIG_ENABLE else []
    return {"index": index, "name": name, "uuid": uuid, "driverVersion": nv.driver_version(),
            "cudaDriverVersion": nv.cuda_version(), "memoryBytes": mem.total if r == SUCCESS else 0,
            "memoryV2": {"total": v2[0], "reserved": v2[1]} if v2 else None, "migMode": mig,
            "migDevices": [{"uuid": u, "name": n, "memoryBytes": m} for u, n, m in migs],
            "processes": [{"pid": p, "usedBytes": u} for p, u in nv.processes(h)],
            "utilization": nv.utilization(h)}


def main():
    cmds = {"discover": discover, "gpu": gpu}
    if len(sys.argv) != 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        nv = NVML()
        json.dump(cmds[sys.argv[1]](nv), sys.stdout, indent=2)
        print()
        nv.shutdown()
    except NVMLError as e:
        print("nvml.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
