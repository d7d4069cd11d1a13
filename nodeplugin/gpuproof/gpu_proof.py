#!/usr/bin/env python3
"""make gpu-proof: the node half of gpuslice checked on a real NVIDIA GPU, in
one command and a few minutes, with no Kubernetes and no Go.

It builds libgpuslice.so, slice-check and gpuproof-cuda with gcc, prepares
each claim as the node plugin prepares it (plugin_files.py) and, as root,
runs the claim's programs in a container made as its CDI spec makes it
(container.py): a private mount namespace with the shim loaded by a
bind-mounted /etc/ld.so.preload and the limits read-only at
/run/gpuslice/gpuslice.limits. Not as root it says so, and preloads the
shim with LD_PRELOAD instead. It reports:

  View          slice-check, nvidia-smi, NVML (C and nvidia-ml-py),
                torch.cuda.mem_get_info() and CuPy report the slice
  Memory limit  every allocation path (driver API: linear, managed, VMM,
                stream-ordered, pools; PyTorch's caching allocator, with
                expandable segments, with cudaMallocAsync; CuPy; cuBLAS's
                workspace) allocates up to the slice and is refused past it;
                two processes share one budget; kill -9 frees a share
  Production    the shim through /etc/ld.so.preload; the limits file a
                tenant cannot write, replace, remove or override (production.py)
  Any-size      a consumed-capacity share: view, limit, compute share
  Time-sliced   a pair: the whole GPU, each other's memory, no shim
  Compute share the GPU checked idle, then kernel loops (a spin kernel, a
                PyTorch matmul) at the share against the same loop without
                the shim, measured in this run
  Overhead      per-call cost of the shim on cuMemAlloc+cuMemFree and a launch
  Discovery     the node plugin's discovery through NVML (nvml.py)
  Bypass        a process started without the shim is listed by NVML
  Enforcer      the node plugin's enforcer (enforcer.py) over a claim whose
                processes this harness names: a process of the claim without
                the shim that takes it past its limit is stopped (SIGKILL),
                the claim's process with the shim is untouched, the
                observation reaches the claim's limits file, and a process
                with the shim filling its slice is never stopped
  MIG           MIG mode; on a GPU in MIG mode, a MIG claim on an instance

Every verdict names the GPU, driver and CUDA version. Without a GPU it runs
the same checks against the simulated driver of nodeplugin/shim/fake (what
make test does); the parts that need a real GPU and Python's GPU stack are
then reported as "skipped: no GPU". With a GPU, every part is required: a
missing module is a failure.

Exit status: 0 when every check passed, 1 when one failed, 2 on bad usage.
No GPU setting is changed and no file outside --work written, but for the
mount points a claim's container needs where this machine lacks them
(removed at the end); the mounts are in the containers' namespaces only.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

import container
import nvml
import plugin_files
import production
from harness import MiB, Child, ClaimEnv, Failed, Report, in_claim, json_out, kv, last_json, mib
from plugin_files import L

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHIM_SRC = os.path.join(REPO, "nodeplugin", "shim")
PARTS = ["view", "memory", "production", "any-size", "time-sliced", "compute", "overhead", "discovery", "bypass", "enforcer",
         "mig"]
# The share a paced loop must reach, give or take (percentage points); the
# shim's own tests hold four simulated tenants to the same.
SHARE_TOLERANCE_PP = 5.0
CHUNK_MIB = 256


class Proof:
    def __init__(self, a, report):
        self.a = a
        self.r = report
        self.t0 = time.monotonic()
        self.work = os.path.abspath(a.work)
        self.build = os.path.join(self.work, "build")
        self.claims = os.path.join(self.work, "claims")
        self.nclaims = 0
        self.real = False
        self.fake_state = None
        self.ctx_overhead = L["DEFAULT_CONTEXT_OVERHEAD"]
        self.production = False  # claims in containers: root, and unshare(2) works
        self.not_production = ""  # why not
        self.made = []  # mount points made on this machine, removed at the end
        self.gpu = {}  # nvml.py gpu: name, versions, MIG mode, processes
        self.preload_file = ""
        self.card = {}
        self.discovered = None
        self.discover_error = ""
        self.modules = {}

    # ---- processes and environments ----

    def base_env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GPUSLICE_", "FAKEGPU_", "PYTORCH_CUDA_ALLOC_CONF")) and k != "LD_PRELOAD"}
        env["CUDA_VISIBLE_DEVICES"] = "0"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if not self.real:
            fake = os.path.join(self.build, "shim", "fake")
            env["LD_LIBRARY_PATH"] = fake + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
            env["FAKEGPU_STATE"] = self.fake_state
            env["FAKEGPU_CONTEXT_BYTES"] = str(self.ctx_overhead)
        return env

    def fresh_gpu(self):
        """On the simulated driver, a new simulated GPU (the fake never frees a
        killed process's memory); on a real one, nothing."""
        if not self.real:
            self.nclaims += 1
            self.fake_state = os.path.join(self.claims, "fakegpu-%d" % self.nclaims)

    def claim(self, limit, share, kind="limited", mig=None, **extra):
        """The environment of a process in a new claim, prepared as the node
        plugin prepares it: the limits file and region written as prepare.go
        writes them (plugin_files.py), and on the production path a container
        with the mounts and environment of the claim's CDI spec
        (container.py): the shim loaded by /etc/ld.so.preload, the limits
        read-only at /run/gpuslice/gpuslice.limits. Without root, the shim
        in LD_PRELOAD and the directory in GPUSLICE_ACCOUNTING_DIR. extra
        is what the claim's own process sets in its environment."""
        self.nclaims += 1
        d = os.path.join(self.claims, "claim-%d" % self.nclaims)
        if kind == "limited":
            plugin_files.prepare(d, limit, share)
        else:
            os.makedirs(d)
        env = self.base_env()
        if kind == "mig":
            env.pop("FAKEGPU_STATE", None)  # a MIG instance's memory is its own
        spec_file = None
        spec = container.spec(kind, self.uuid, self.shim_lib, self.preload_file, d, limit, share, mig=mig)
        if self.production:
            spec_file = os.path.join(d, "container.json")
            with open(spec_file, "w") as f:
                json.dump(spec, f)
        else:
            env.update(e.split("=", 1) for e in spec["env"])
            if kind == "limited":
                env.update({"GPUSLICE_ACCOUNTING_DIR": d, "LD_PRELOAD": self.shim_lib})
        env.update({k: str(v) for k, v in extra.items()})
        return ClaimEnv(env, d, spec_file)

    def left(self, timeout):
        """timeout, cut to what is left of --budget; once it is spent, the
        step fails at once instead of running."""
        rest = self.a.budget - (time.monotonic() - self.t0)
        if rest <= 0:
            raise Failed("not run: the time budget of %d s is spent (--budget)" % self.a.budget)
        return max(1, min(timeout, rest))

    def run(self, argv, env, timeout=60):
        timeout = self.left(timeout)
        try:
            p = subprocess.run(in_claim(argv, env), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
            raise Failed("%s did not finish within %.0f s: %s" % (" ".join(argv[:3]), timeout, out[-500:]))
        except OSError as e:
            raise Failed("cannot run %s: %s" % (argv[0], e))
        return p.returncode, p.stdout

    def cuda(self, *args):
        return [os.path.join(self.build, "gpuproof-cuda")] + [str(a) for a in args]

    def py(self, *args):
        return [sys.executable, os.path.join(HERE, "gpu_parts.py")] + [str(a) for a in args]

    def region(self, env):
        """The claim's accounting region header, read as the node plugin's
        metrics read it (offsets from gpuslice.h)."""
        path = os.path.join(env.dir, "gpuslice.region")
        try:
            with open(path, "rb") as f:
                b = f.read(256)
        except OSError:
            return None
        if len(b) < 256:
            return None
        u64 = lambda name: struct.unpack_from("<Q", b, L["OFF_" + name])[0]
        return {"used": u64("USED"), "limit": u64("MEMORY_LIMIT"), "high": u64("HIGH_WATER"),
                "refused": u64("OOM_COUNT"), "reclaimed": u64("RECLAIMED_BYTES")}

    # ---- set-up ----

    def detect(self):
        want = self.a.driver
        smi = shutil.which("nvidia-smi")
        gpu = False
        if smi:
            try:
                p = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
                gpu = p.returncode == 0 and any(l.startswith("GPU ") for l in p.stdout.splitlines())
            except (OSError, subprocess.TimeoutExpired):
                gpu = False
        if want == "real" and not gpu:
            raise SystemExit("gpu-proof: --driver real, but nvidia-smi -L lists no GPU here")
        self.real = gpu if want == "auto" else want == "real"

    def build_all(self):
        for d in (self.build, self.claims):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        out = os.path.join(self.build, "shim")
        jobs = str(min(os.cpu_count() or 2, 16))
        targets = ["lib"] if self.real else ["all"]
        rc, o = self.run(["make", "-s", "-C", SHIM_SRC, "OUT=" + out, "-j" + jobs] + targets, os.environ, timeout=300)
        if rc:
            raise SystemExit("gpu-proof: building the shim failed:\n" + o)
        self.shim_lib = os.path.abspath(self.a.shim) if self.a.shim else os.path.join(out, "libgpuslice.so")
        self.smi = os.path.join(out, "gpuslice-smi")
        for name, src in (("slice-check", os.path.join(REPO, "internal", "images", "slicecheck", "slice-check.c")),
                          ("gpuproof-cuda", os.path.join(HERE, "cuda", "gpuproof-cuda.c"))):
            rc, o = self.run(["gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-o", os.path.join(self.build, name), src,
                              "-ldl"], os.environ, timeout=120)
            if rc:
                raise SystemExit("gpu-proof: building %s failed:\n%s" % (name, o))
        self.fresh_gpu()

    def python_modules(self):
        """Which of PyTorch (with CUDA), CuPy and nvidia-ml-py import here."""
        probes = {
            "torch": "import torch; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'; print(torch.__version__)",
            "cupy": "import cupy; print(cupy.__version__)",
            "pynvml": "import pynvml; print(getattr(pynvml, '__version__', 'unknown'))",
        }
        for name, code in probes.items():
            try:
                rc, o = self.run([sys.executable, "-c", code], self.base_env(), timeout=120)
            except Failed as e:
                rc, o = 1, str(e)
            lines = o.strip().splitlines()
            self.modules[name] = (rc == 0, lines[-1] if lines else "")

    def gpu_only(self, module, name):
        """Whether a part that needs a real GPU and module can run; if not,
        it is reported as skipped (no GPU) or failed (a GPU without the
        module)."""
        if not self.real:
            self.r.skip(name, "no GPU")
            return False
        ok, why = self.modules.get(module, (False, "not probed"))
        if not ok:
            self.r.fail(name, "%s is required on a GPU machine and does not import: %s" % (module, why))
            return False
        return True

    def header(self):
        r = self.r
        r.out("gpuslice gpu-proof, %s UTC, on %s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), socket.gethostname()))
        rev = "unknown (no git checkout)"
        try:
            p = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, timeout=10)
            if p.returncode == 0:
                rev = p.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
        r.out("revision %s; Python %s; %s" % (rev, platform.python_version(), platform.platform()))
        rc, o = self.run(self.cuda("card"), self.base_env())
        line = next((l for l in o.splitlines() if l.startswith("card ")), None)
        if rc or not line:
            raise SystemExit("gpu-proof: the CUDA driver does not answer (gpuproof-cuda card): " + o)
        self.card = kv(line)
        self.card["total"] = int(self.card["total"])
        try:
            self.gpu = self.nvml("gpu")
            self.discovered = self.nvml("discover")
        except Failed as e:
            raise SystemExit("gpu-proof: NVML does not answer: %s" % e)
        g = self.gpu
        self.uuid = g["uuid"]
        self.r.tag = "%s%s, driver %s, CUDA %s" % ("" if self.real else "SIMULATED ", g["name"], g["driverVersion"],
                                                   g["cudaDriverVersion"])
        if self.real:
            r.out("driver: REAL: %s, %s, driver %s, CUDA %s, %s" % (g["name"], g["uuid"], g["driverVersion"],
                                                                    g["cudaDriverVersion"], mib(g["memoryBytes"])))
            r.out("python modules: " + ", ".join("%s %s" % (k, v[1] if v[0] else "MISSING (%s)" % v[1])
                                                 for k, v in self.modules.items()))
        else:
            r.out("driver: SIMULATED (no NVIDIA GPU here): the fake libcuda.so.1 and libnvidia-ml.so.1 of")
            r.out("        nodeplugin/shim/fake, a %s of %s, driver %s, CUDA %s. Not a proof on silicon."
                  % (g["name"], mib(self.card["total"]), g["driverVersion"], g["cudaDriverVersion"]))
        v2 = g.get("memoryV2")
        r.out("MIG mode: %s%s" % (g["migMode"], "; instances: " + ", ".join(
            "%s (%s, %s)" % (m["uuid"], m["name"], mib(m["memoryBytes"])) for m in g["migDevices"]) if g["migDevices"] else ""))
        found = self.discovered["gpus"]
        self.total = found[0]["memoryBytes"] if found else g["memoryBytes"]
        source = found[0]["memorySource"] if found else nvml.MEMORY_NVML_V1 + ": discovery skipped the GPU"
        r.out("card memory: %s (memory source %s, as the node plugin's discovery reads it%s); slices: %s of it (memory x fraction / 100)"
              % (mib(self.total), source, "; the v2 memory info: %s, of which the driver reserves %s" % (mib(v2["total"]), mib(v2["reserved"]))
                 if v2 else "", ", ".join("%d %%" % f for f in self.a.slices)))
        self.setup_production()
        if self.production:
            r.out("each claim: prepared as the node plugin prepares it (its limits file and region written as prepare.go writes them),")
            r.out("  its processes in a container made as its CDI spec makes it: a private mount namespace with the shim at")
            r.out("  %s loaded by a bind-mounted %s, the accounting directory at %s and the limits read-only at" % (
                container.LIBRARY, container.PRELOAD, container.ACCOUNTING_DIR))
            r.out("  %s; nothing in LD_PRELOAD; context overhead charged %s (the plugin's default)" % (
                container.LIMITS, mib(self.ctx_overhead)))
        else:
            r.out("NOT THE PRODUCTION PATH: %s." % self.not_production)
            r.out("  Not proved here: the shim loaded by /etc/ld.so.preload in a mount namespace, the read-only limits mount.")
            r.out("  Each claim instead: its limits file and region written as the plugin writes them, the shim in LD_PRELOAD,")
            r.out("  GPUSLICE_ACCOUNTING_DIR naming the directory. Run as root for the production path.")

    def nvml(self, cmd):
        """nvml.py's JSON for cmd, on the machine's NVML (or the simulated one)."""
        rc, o = self.run([sys.executable, os.path.join(HERE, "nvml.py"), cmd], self.base_env())
        if rc:
            raise Failed("nvml.py %s: %s" % (cmd, o.strip()[-300:]))
        try:
            return json_out(o)
        except ValueError as e:
            raise Failed("nvml.py %s: %s" % (cmd, e))

    def setup_production(self):
        """Whether claims run in containers: root, and a mount namespace with
        a claim's mounts works here. The mount points the spec needs and this
        machine lacks are made (empty) and removed at the end."""
        if os.geteuid() != 0:
            self.not_production = "not root (unshare(2) and mount(2) need it)"
            return
        self.preload_file = os.path.join(self.build, "ld.so.preload")
        with open(self.preload_file, "w") as f:
            f.write(container.PRELOAD_CONTENT)
        probe = container.spec("limited", self.uuid, self.shim_lib, self.preload_file, self.claims, 1, 1)
        try:
            for path, is_dir in container.mount_points(probe):
                if is_dir:
                    os.mkdir(path)
                else:
                    open(path, "x").close()
                self.made.append(path)
        except OSError as e:
            self.not_production = "cannot make the mount point %s: %s" % (e.filename, e.strerror)
            return
        self.production = True
        try:
            rc, o = self.run(["true"], self.claim(1 << 30, 50))
        except Failed as e:
            rc, o = 1, str(e)
        if rc:
            self.production = False
            self.not_production = "a claim's container cannot be made here: %s" % o.strip()[-300:]

    def remove_mount_points(self):
        for path in reversed(self.made):
            try:
                os.rmdir(path) if os.path.isdir(path) else os.unlink(path)
            except OSError as e:
                print("gpu-proof: cannot remove the mount point %s it made: %s" % (path, e), file=sys.stderr)
        self.made = []

    # ---- view ----

    def view(self, f, limit):
        r = self.r
        r.sub("View (slice %d %%: %s = %d bytes)" % (f, mib(limit), limit))
        want_mib = limit // MiB
        env = self.claim(limit, f)
        try:
            rc, o = self.run([os.path.join(self.build, "slice-check")], env, timeout=120)
            m = re.search(r"device 0: (.*), (\d+) MiB total", o)
            got = int(m.group(2)) if m else None
            r.check(got == want_mib, "slice-check reports the slice", "%s MiB total (want %d)" % (got, want_mib))
            r.check(rc == 0 and "the slice held" in o, "slice-check refuses allocations past the slice",
                    next((l for l in o.splitlines() if "allocated" in l), o.strip()[-200:]).replace("slice-check: ", ""))
            k = next((l for l in o.splitlines() if "of the GPU's time" in l), None)
            if k:
                r.info(k.replace("slice-check: ", "slice-check's kernels at %d %% compute: " % f))
        except Failed as e:
            r.fail("slice-check", str(e))
        try:
            rc, o = self.run([self.smi, "--csv"], self.claim(limit, f))
            fields = [x.strip() for x in o.strip().splitlines()[0].split(",")] if rc == 0 and o.strip() else []
            got = int(fields[2]) if len(fields) > 2 else None
            r.check(got == want_mib, "gpuslice-smi (NVML) reports the slice", "%s MiB total (want %d)" % (got, want_mib))
        except Failed as e:
            r.fail("gpuslice-smi", str(e))
        if self.real:
            self.view_nvidia_smi(f, limit)
        else:
            r.skip("nvidia-smi reports the slice", "no GPU (gpuslice-smi above makes the same NVML calls)")
        try:
            rc, o = self.run(self.cuda("view"), self.claim(limit, f))
            for api in ("cuMemGetInfo_v2", "cuDeviceTotalMem_v2", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2"):
                line = next((kv(l) for l in o.splitlines() if l.startswith("view api=%s " % api)), None)
                got = int(line["total"]) if line and line.get("rc") == "0" else None
                r.check(got == limit, "%s reports the slice" % api, "total %s bytes (want %d)" % (got, limit))
        except Failed as e:
            r.fail("driver API and NVML view", str(e))
        if self.gpu_only("pynvml", "nvidia-ml-py reports the slice"):
            try:
                rc, o = self.run(self.py("nvml-view"), self.claim(limit, f))
                ev = last_json(o)
                r.check(ev["total"] == limit, "nvidia-ml-py reports the slice",
                        "nvmlDeviceGetMemoryInfo total %d (want %d), used %s" % (ev["total"], limit, mib(ev["used"])))
            except (Failed, ValueError, KeyError, IndexError) as e:
                r.fail("nvidia-ml-py reports the slice", "%s" % e)
        if self.gpu_only("torch", "torch.cuda.mem_get_info() reports the slice"):
            try:
                rc, o = self.run(self.py("torch-view"), self.claim(limit, f), timeout=120)
                ev = last_json(o)
                r.check(ev["total"] == limit, "torch.cuda.mem_get_info() reports the slice",
                        "total %d (want %d), free %s" % (ev["total"], limit, mib(ev["free"])))
                r.check(ev["total_memory"] == limit, "torch.cuda.get_device_properties(0).total_memory is the slice",
                        "%d (want %d)" % (ev["total_memory"], limit))
            except (Failed, ValueError, KeyError, IndexError) as e:
                r.fail("torch.cuda.mem_get_info() reports the slice", "%s" % e)

    def view_nvidia_smi(self, f, limit):
        r = self.r
        want_mib = limit // MiB
        try:
            rc, o = self.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.total,memory.used", "--format=csv,noheader,nounits"],
                             self.claim(limit, f))
            vals = [x.strip() for x in o.strip().splitlines()[0].split(",")] if rc == 0 else []
            got = int(vals[0]) if vals and vals[0].isdigit() else None
            r.check(got is not None and abs(got - want_mib) <= 1, "nvidia-smi --query-gpu=memory.total reports the slice",
                    "%s MiB (want %d)" % (got, want_mib))
            rc, o = self.run(["nvidia-smi", "-i", "0"], self.claim(limit, f))
            m = re.search(r"(\d+)MiB\s*/\s*(\d+)MiB", o)
            got = int(m.group(2)) if m else None
            r.check(got is not None and abs(got - want_mib) <= 1, "nvidia-smi's table shows the slice",
                    m.group(0) if m else "no 'used / total' in: " + o[-300:])
        except Failed as e:
            r.fail("nvidia-smi reports the slice", str(e))

    # ---- memory ----

    def device_used(self):
        """Device memory in use per nvidia-smi (real GPU), in bytes."""
        rc, o = self.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         self.base_env())
        return int(o.strip().splitlines()[0]) * MiB

    def up_to_slice(self, allocated, limit, chunk):
        """Allocations reached the slice: what the context leaves of it, less
        the block that was refused and one more for pool granularity."""
        return allocated >= limit - self.ctx_overhead - 2 * chunk

    def memory(self, f, limit):
        r = self.r
        r.sub("Memory limit (slice %d %%: %s)" % (f, mib(limit)))
        chunk = CHUNK_MIB * MiB
        for path, what in (("linear", "cuMemAlloc_v2"), ("managed", "cuMemAllocManaged"),
                           ("vmm", "cuMemCreate + cuMemMap (VMM)"), ("async", "cuMemAllocAsync (stream-ordered, default pool)"),
                           ("pool", "cuMemAllocFromPoolAsync (a created pool)")):
            name = "%s allocates up to the slice and is refused past it" % what
            env = self.claim(limit, f)
            try:
                rc, o = self.run(self.cuda("fill", path, CHUNK_MIB), env, timeout=120)
                line = next((kv(l) for l in o.splitlines() if l.startswith("fill ")), None)
                if rc or not line:
                    raise Failed("gpuproof-cuda fill %s: status %d: %s" % (path, rc, o.strip()[-300:]))
                got, nxt = int(line["allocated"]), line["next"]
                reg = self.region(env)
                ok = nxt == "CUDA_ERROR_OUT_OF_MEMORY" and reg and reg["high"] <= limit and got <= limit \
                    and self.up_to_slice(got, limit, chunk) and reg["refused"] >= 1
                r.check(ok, name, "%s in %s blocks, the next: %s; region high-water %s of %s, %s refused"
                        % (mib(got), line["blocks"], nxt, mib(reg["high"]) if reg else "?", mib(limit),
                           reg["refused"] if reg else "?"))
            except Failed as e:
                r.fail(name, str(e))
            self.fresh_gpu()
        for conf, what in (("", "PyTorch's caching allocator"),
                           ("expandable_segments:True", "PyTorch with expandable_segments:True (VMM)"),
                           ("backend:cudaMallocAsync", "PyTorch with backend:cudaMallocAsync")):
            name = "%s is refused past the slice with a torch.OutOfMemoryError it catches" % what
            if self.gpu_only("torch", name):
                self.fill_python(name, what, ["torch-fill", "--chunk-mib", CHUNK_MIB], limit, f,
                                 {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {})
        name = "CuPy's memory pool is refused past the slice with cupy's OutOfMemoryError"
        if self.gpu_only("cupy", name):
            self.fill_python(name, "CuPy", ["cupy-fill", "--chunk-mib", CHUNK_MIB], limit, f, {})
        name = "cuBLAS's workspace in a first matmul on a full slice"
        if self.gpu_only("torch", name):
            self.cublas(name, limit, f)
        self.two_processes("driver API", f, limit,
                           lambda mib_, churn: self.cuda("hog", mib_, churn), lambda: self.cuda("interactive"))
        self.fresh_gpu()
        name = "two processes share one claim's budget, kill -9 frees a share (PyTorch)"
        if self.gpu_only("torch", name):
            self.two_processes("PyTorch", f, limit,
                               lambda mib_, churn: self.py("torch-hog", "--mib", mib_, "--churn-mib", churn),
                               lambda: self.py("torch-interactive"))

    def fill_python(self, name, what, args, limit, f, extra):
        r = self.r
        env = self.claim(limit, f, **extra)
        c = None
        try:
            base = self.device_used()
            c = Child(self.py(*args), env, args[0])
            ev = c.expect("filled", self.left(180))
            real = self.device_used() - base
            c.send("go")
            done = c.expect("done", self.left(60))
            c.close()
            reg = self.region(env)
            got = ev["allocated"]
            ok = ev["caught_oom"] and got <= limit and self.up_to_slice(got, limit, ev["chunk"]) and reg \
                and reg["high"] <= limit and done.get("recovered")
            r.check(ok, name, "%s allocated, then %s: %s; recovered after freeing: %s; region high-water %s of %s"
                    % (mib(got), ev["error_type"], ev["error"][:120], done.get("recovered"),
                       mib(reg["high"]) if reg else "?", mib(limit)))
            r.check(real <= limit, "the driver's own count of %s stays within the slice" % what,
                    "nvidia-smi: the process used %s of the %s slice at its fullest" % (mib(real), mib(limit)))
        except (Failed, KeyError) as e:
            r.fail(name, str(e))
        finally:
            if c:
                c.close(5)

    def cublas(self, name, limit, f):
        r = self.r
        env = self.claim(limit, f)
        c = None
        try:
            base = self.device_used()
            c = Child(self.py("torch-cublas"), env, "torch-cublas")
            ev = c.expect("full", self.left(180))
            real = self.device_used() - base
            c.send("go")
            done = c.expect("done", self.left(60))
            c.close()
            reg = self.region(env)
            first_ok = ev["first"] in ("ran", "OutOfMemoryError")
            ok = first_ok and done.get("second") == "ran" and reg and reg["high"] <= limit
            r.check(ok, name, "with %s filled, the first matmul: %s%s; after freeing half: %s (workspace %s); "
                    "region high-water %s of %s"
                    % (mib(ev["filled"]), ev["first"], " (" + ev["error"][:100] + ")" if ev["error"] else "",
                       done.get("second"), mib(done.get("workspace", 0)), mib(reg["high"]) if reg else "?", mib(limit)))
            r.check(real <= limit, "the driver's own count of the cuBLAS process stays within the slice",
                    "nvidia-smi: the process used %s of the %s slice at its fullest" % (mib(real), mib(limit)))
        except (Failed, KeyError) as e:
            r.fail(name, str(e))
        finally:
            if c:
                c.close(5)

    def two_processes(self, stack, f, limit, hog, interactive):
        """A holds 55 % of what the slice leaves after a context and churns;
        B, in the same claim, is refused as much again, gets 25 %; A is killed
        with -9 mid-allocation; B then gets A's amount."""
        r = self.r
        usable = limit - self.ctx_overhead
        a_mib = int(usable * 0.55) // MiB // 2 * 2
        b_mib = int(usable * 0.25) // MiB // 2 * 2
        env = self.claim(limit, f)
        A = B = None
        name = "two processes share one claim's budget (%s)" % stack
        try:
            A = Child(hog(a_mib, 64), env, "process A")
            A.expect("holding", self.left(180))
            B = Child(interactive(), env, "process B")
            B.expect("ready", self.left(180))

            def alloc(n):
                B.send("alloc %d" % n)
                return kv(B.expect("alloc ", self.left(120)))["rc"]

            refused = ("CUDA_ERROR_OUT_OF_MEMORY", "OutOfMemoryError")
            rc1 = alloc(a_mib)
            rc2 = alloc(b_mib)
            r.check(rc1 in refused and rc2 == "CUDA_SUCCESS", name,
                    "A holds %d MiB; B asking %d MiB: %s; B asking %d MiB: %s" % (a_mib, a_mib, rc1, b_mib, rc2))
            A.kill9()
            rc3 = alloc(a_mib)
            reg = self.region(env)
            r.check(rc3 == "CUDA_SUCCESS" and reg and reg["high"] <= limit and reg["reclaimed"] >= a_mib * MiB,
                    "kill -9 of a process mid-allocation frees its share (%s)" % stack,
                    "after kill -9 of A, B asking %d MiB: %s; %s reclaimed; region high-water %s of %s"
                    % (a_mib, rc3, mib(reg["reclaimed"]) if reg else "?", mib(reg["high"]) if reg else "?", mib(limit)))
        except (Failed, KeyError) as e:
            r.fail(name, str(e))
        finally:
            if A:
                A.kill9()
                A.close()
            if B:
                B.close(10)

    # ---- compute ----

    def compute(self):
        r = self.r
        r.section("Compute share")
        secs = self.a.compute_seconds
        shares = sorted(set(self.a.slices)) + [100]
        self.fresh_gpu()
        production.idle(self)
        r.sub("a spin kernel (500 us, batches of 20, synchronised), driver API, %g s each" % secs)
        self.share_loop(lambda: self.cuda("spin", secs, 500, 20), lambda o: kv(next(
            l for l in o.splitlines() if l.startswith("spin ")))["kernels"], shares, "kernels")
        name = "PyTorch float16 4096x4096 matmul loop"
        r.sub("%s, %g s each" % (name, secs))
        if self.gpu_only("torch", name + " paced to its share"):
            self.share_loop(lambda: self.py("torch-matmul", "--seconds", secs),
                            lambda o: last_json(o)["iterations"], shares, "matmuls")

    def share_loop(self, argv, count, shares, unit, limit=None):
        r = self.r
        secs = self.a.compute_seconds

        def measure(env):
            rc, o = self.run(argv(), env, timeout=120 + 2 * secs)
            if rc:
                raise Failed("status %d: %s" % (rc, o.strip()[-300:]))
            try:
                return float(count(o)) / secs
            except (StopIteration, ValueError, KeyError, IndexError):
                raise Failed("unreadable output: %s" % o.strip()[-300:])

        try:
            bare = measure(self.base_env())
        except Failed as e:
            r.fail("the loop without the shim", str(e))
            return
        r.info("without the shim: %.1f %s/s [%s]" % (bare, unit, r.tag))
        for s in shares:
            try:
                rate = measure(self.claim(limit or self.total * s // 100, s))
            except Failed as e:
                r.fail("the loop at %d %%" % s, str(e))
                continue
            frac = rate / bare if bare else 0
            if s < 100:
                err = (frac - s / 100.0) * 100
                r.check(abs(err) <= SHARE_TOLERANCE_PP, "paced to a %d %% share" % s,
                        "%.1f %s/s = %.3f of the loop without the shim (error %+.1f points; within %g)"
                        % (rate, unit, frac, err, SHARE_TOLERANCE_PP))
            else:
                r.check(frac >= 0.9, "a lone process at 100 % keeps its throughput",
                        "%.1f %s/s = %.3f of the loop without the shim (pacing costs %.1f %%)"
                        % (rate, unit, frac, (1 - frac) * 100))

    # ---- overhead ----

    def overhead(self):
        r = self.r
        r.section("Overhead per call (share 100 %, best of 5 rounds)")
        allocs, launches = (2000, 20000) if self.real else (20000, 100000)
        limit = self.total * max(self.a.slices) // 100
        res = {}
        self.fresh_gpu()
        try:
            for label, env in (("without", self.base_env()), ("with", self.claim(limit, 100))):
                rc, o = self.run(self.cuda("bench", allocs, launches), env, timeout=180)
                line = next((kv(l) for l in o.splitlines() if l.startswith("bench ")), None)
                if rc or not line:
                    raise Failed("gpuproof-cuda bench %s the shim: %s" % (label, o.strip()[-300:]))
                res[label] = (float(line["alloc_free_ns"]), float(line["launch_ns"]))
            for i, what in ((0, "cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB"), (1, "cuLaunchKernel of an empty kernel")):
                w, s = res["without"][i], res["with"][i]
                r.check(w > 0 and s > 0, what, "%.0f ns without the shim, %.0f ns with it: %+.0f ns (%+.1f %%)"
                        % (w, s, s - w, (s - w) / w * 100))
        except Failed as e:
            r.fail("overhead", str(e))

    # ---- discovery, bypass ----

    def discovery(self):
        r = self.r
        r.section("Discovery (nvml.py: the node plugin's nodeplugin/discovery, held to it in make test)")
        d = self.discovered
        for s in d.get("skipped") or []:
            r.info("skipped GPU %s (%s): %s" % (s.get("Index"), s.get("UUID"), s.get("Reason")))
        if not r.check(len(d["gpus"]) >= 1, "discovery finds the GPU", "%d GPU(s)" % len(d["gpus"])):
            return
        g = d["gpus"][0]
        cc = "%d.%d" % (g["ccMajor"], g["ccMinor"])
        r.info("GPU %d: %s, %s (%s), %s, compute capability %s (%s), MIG mode %s, PCI %s, driver %s, CUDA %s"
               % (g["index"], g["name"], mib(g["memoryBytes"]), g["memorySource"], g["uuid"], cc, g["architecture"],
                  self.gpu["migMode"], g["pciBusId"], g["driverVersion"], g["cudaDriverVersion"]))
        # the plugin's rule (nodeplugin/discovery/memory.go): v2's total
        # less the driver's reserve where the driver has it, else v1's
        v2 = self.gpu.get("memoryV2")
        want = (v2["total"] - v2["reserved"], nvml.MEMORY_NVML_V2) if v2 else (self.gpu["memoryBytes"], nvml.MEMORY_NVML_V1)
        r.check((g["memoryBytes"], g["memorySource"]) == want, "the memory is what allocations can get, as the node plugin reads it",
                "%s from %s; NVML's v1 total %s%s" % (mib(g["memoryBytes"]), g["memorySource"], mib(self.gpu["memoryBytes"]),
                                                     ", v2 total %s less %s reserved" % (mib(v2["total"]), mib(v2["reserved"])) if v2 else ", no v2 memory info"))
        r.check(g["name"] == self.card["name"] or self.gpu["migMode"] == "enabled", "the model is the driver's device name",
                "NVML %r, cuDeviceGetName %r" % (g["name"], self.card["name"]))
        r.check(g["uuid"].startswith("GPU-") and g["memoryBytes"] > 0 and g["ccMajor"] > 0,
                "UUID, memory and compute capability are read", "%s, %s, %s" % (g["uuid"], mib(g["memoryBytes"]), cc))
        if self.real:
            rc, o = self.run(["nvidia-smi", "-i", "0", "--query-gpu=uuid,memory.total,compute_cap",
                              "--format=csv,noheader,nounits"], self.base_env())
            v = [x.strip() for x in o.strip().splitlines()[0].split(",")] if rc == 0 else []
            # nvidia-smi's memory.total is NVML's v1 total, reserve included
            r.check(len(v) == 3 and v[0] == g["uuid"] and v[1].isdigit() and abs(int(v[1]) - self.gpu["memoryBytes"] // MiB) <= 1
                    and v[2] == cc, "nvidia-smi agrees", ", ".join(v) if v else o.strip()[-200:])
        step = 256 * MiB  # contract.MemoryStep
        r.info("the node plugin would offer on it: %s; any-size up to %s in steps of %s; time-sliced shares of the whole GPU"
               % (", ".join("%d x %d %% (%s)" % (100 // f, f, mib(g["memoryBytes"] * f // 100)) for f in (25, 50, 100)),
                  mib(g["memoryBytes"] // step * step), mib(step)))

    def processes(self):
        """NVML's compute processes on GPU 0: {pid: used bytes}."""
        return {p["pid"]: p["usedBytes"] for p in self.nvml("gpu")["processes"]}

    def bypass(self):
        r = self.r
        r.section("Bypass detection (NVML's per-process memory, which the node plugin's metrics and enforcer read)")
        self.fresh_gpu()
        hold_mib = 1024
        c = None
        name = "a process without the shim is listed by NVML with its memory"
        try:
            before = self.processes()
            c = Child(self.cuda("hold", hold_mib), self.base_env(), "the process without the shim")
            pid = int(kv(c.expect("holding", self.left(120)))["pid"])
            during = self.processes()
            new = {p: u for p, u in during.items() if p not in before}
            grew = sum(during.values()) - sum(before.values())
            r.check(len(new) >= 1 and grew >= hold_mib * MiB, name,
                    "NVML's processes %d -> %d, their memory %s -> %s (it holds %d MiB); a process of no claim is what "
                    "gpuslice_gpu_unattributed_memory_bytes counts" % (len(before), len(during), mib(sum(before.values())),
                                                                       mib(sum(during.values())), hold_mib))
            r.info("NVML lists its PID %d: %s%s" % (pid, "yes" if pid in during else "no",
                   "" if pid in during else " (NVML reports PIDs of the host's PID namespace)"))
            r.info("a CUDA context costs %s on this GPU by NVML (the shim charges %s for one) [%s]"
                   % (mib(int(grew) - hold_mib * MiB), mib(self.ctx_overhead), r.tag))
            c.close()
            deadline = time.monotonic() + 20
            after = self.processes()
            while sum(after.values()) > sum(before.values()) and time.monotonic() < deadline:
                time.sleep(0.2)
                after = self.processes()
            r.check(sum(after.values()) <= sum(before.values()), "its memory is no longer listed once it exits",
                    "%s listed" % mib(sum(after.values())))
        except (Failed, ValueError, KeyError, IndexError) as e:
            r.fail(name, str(e))
        finally:
            if c:
                c.close(5)

    def limits_observed(self, env):
        """The observation the enforcer wrote into the claim's limits file."""
        return plugin_files.read_observation(os.path.join(env.dir, "gpuslice.limits"))

    def enforcer(self):
        r = self.r
        r.section("Enforcer (enforcer.py: the node plugin's nodeplugin/enforce, held to it in make test, on this machine's NVML)")
        self.fresh_gpu()
        limit = self.total * 25 // 100
        env = self.claim(limit, 25)
        enf = legit = bypass = filler = None
        name = "a process of the claim past its limit without the shim is stopped"
        try:
            enf = Child([sys.executable, os.path.join(HERE, "enforcer.py"), "enforce", "--limit", str(limit), "--limits-file",
                         os.path.join(env.dir, "gpuslice.limits")], self.base_env(), "enforcer.py enforce")
            enf.expect("ready", self.left(60))
            hold = limit // MiB // 2
            legit = Child(self.cuda("hold", hold), env, "the claim's process with the shim")
            enf.send("pid %d" % legit.p.pid)
            legit.expect("holding", self.left(120))
            # the claim's process outside the shim (a static binary, direct
            # driver calls, a chroot without the preload): over the limit with
            # what the other one holds
            bypass = Child(self.cuda("hold", limit // MiB), self.base_env(), "the claim's process without the shim")
            enf.send("pid %d" % bypass.p.pid)
            try:
                bypass.expect("holding", self.left(120))
                over = time.time_ns()
            except Failed:
                over = None  # stopped before it could say so
            kill = enf.expect("kill", self.left(30))
            bypass.p.wait(timeout=self.left(30))
            took = (kill["killedUnixNs"] - over) / 1e6 if over else float("nan")
            r.check(kill["pid"] == bypass.p.pid and not kill.get("error") and bypass.p.returncode == -signal.SIGKILL, name,
                    "pid %d held %s; the claim %s of its %s; killed (exit %s) %.0f ms after it said it held the memory, "
                    "%.0f ms after the sample that saw it began"
                    % (kill["pid"], mib(kill["used"]), mib(kill["claimUsed"]), mib(kill["limit"]),
                       bypass.p.returncode, took, (kill["killedUnixNs"] - kill["sampledUnixNs"]) / 1e6))
            r.check(legit.p.poll() is None, "the claim's process with the shim is untouched",
                    "still running, holding %d MiB" % hold)
            deadline = time.monotonic() + 10
            used, seq = self.limits_observed(env)
            while used < hold * MiB and time.monotonic() < deadline:
                time.sleep(0.05)
                used, seq = self.limits_observed(env)
            r.check(used >= hold * MiB and seq >= 2, "the observation reaches the claim's limits file",
                    "observed_used %s after %d observations (the shim charges against it)" % (mib(used), seq // 2))
            legit.close()
            legit = None
            name = "a process with the shim filling its slice is not stopped"
            filler = Child(self.cuda("interactive"), env, "the claim's process filling its slice")
            enf.send("pid %d" % filler.p.pid)
            filler.expect("ready", self.left(120))
            got = 0
            while True:
                filler.send("alloc %d" % CHUNK_MIB)
                if kv(filler.expect("alloc ", self.left(60)))["rc"] != "CUDA_SUCCESS":
                    break
                got += CHUNK_MIB * MiB
            # a full sample period and then some, with the slice full
            time.sleep(1.0)
            alive = filler.p.poll() is None
            r.check(alive, name, "%s allocated through the shim of the %s slice; %s one second later (the shim charges %s per context: "
                    "a real context that costs more shows here)" % (mib(got), mib(limit), "still running" if alive else "STOPPED",
                                                                     mib(self.ctx_overhead)))
            filler.close()
            filler = None
            enf.p.stdin.close()
            done = enf.expect("done", self.left(30))
            if done:
                r.info("enforcer: %d samples, %.0f µs each on average, %.0f µs at most [%s]"
                       % (done["samples"], done["sampleMeanNs"] / 1e3, done["sampleMaxNs"] / 1e3, r.tag))
        except (Failed, ValueError, KeyError, subprocess.TimeoutExpired) as e:
            r.fail(name, str(e))
        finally:
            for c in (filler, bypass, legit, enf):
                if c:
                    c.close(5)

    # ---- all ----

    def run_all(self):
        self.detect()
        self.build_all()
        if self.real:
            self.python_modules()
        self.header()
        if self.real and self.gpu["migMode"].startswith("enabled"):
            # CUDA sees only its MIG instances: the plugin offers nothing else
            # on such a GPU, and nothing of the shim is proved on it
            self.r.section("The GPU is in MIG mode: only discovery and MIG are proved")
            for part in self.a.parts:
                if part not in ("discovery", "mig"):
                    self.r.skip(part, "the GPU is in MIG mode: the node plugin offers only its MIG instances "
                                      "(turn MIG mode off to prove the slices: nvidia-smi -i 0 -mig 0)")
            self.a.parts = [x for x in self.a.parts if x in ("discovery", "mig")]
        for f in self.a.slices:
            if not ({"view", "memory"} & set(self.a.parts)):
                break
            limit = self.total * f // 100
            self.r.section("Slice %d %%: %s of %s, compute %d %%" % (f, mib(limit), mib(self.total), f))
            if "view" in self.a.parts:
                self.step("view", lambda: self.view(f, limit))
            if "memory" in self.a.parts:
                self.step("memory limit", lambda: self.memory(f, limit))
        parts = {"production": lambda: production.production_path(self), "any-size": lambda: production.any_size(self),
                 "time-sliced": lambda: production.time_sliced(self), "compute": self.compute, "overhead": self.overhead,
                 "discovery": self.discovery, "bypass": self.bypass, "enforcer": self.enforcer,
                 "mig": lambda: production.mig(self)}
        for part, fn in parts.items():
            if part in self.a.parts:
                self.step(part, fn)

    def step(self, name, fn):
        try:
            self.left(1)
            fn()
        except Failed as e:
            self.r.fail(name, str(e))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--driver", choices=["auto", "real", "simulated"], default="auto",
                   help="real: a GPU is required; simulated: the fake driver even where a GPU is; auto: real when nvidia-smi lists a GPU")
    p.add_argument("--report", default=os.path.join(REPO, "tmp", "gpu-proof", "report.txt"), help="where the report is written")
    p.add_argument("--work", default=os.path.join(REPO, "tmp", "gpu-proof"), help="build outputs and claim directories")
    p.add_argument("--shim", default="", help="preload this libgpuslice.so instead of the one built from nodeplugin/shim")
    p.add_argument("--slices", default="25,50", help="slice sizes in percent of the card")
    p.add_argument("--parts", default=",".join(PARTS), help="which parts to run: " + ",".join(PARTS))
    p.add_argument("--compute-seconds", type=float, default=3.0, help="length of each compute-share measurement")
    p.add_argument("--budget", type=int, default=270, help="seconds after which the parts not yet started are failed, not run")
    a = p.parse_args()
    try:
        a.slices = [int(x) for x in a.slices.split(",")]
        assert all(0 < x <= 100 for x in a.slices)
    except (ValueError, AssertionError):
        p.error("--slices %r: want percentages from 1 to 100, e.g. 25,50" % a.slices)
    a.parts = [x.strip() for x in a.parts.split(",") if x.strip()]
    bad = [x for x in a.parts if x not in PARTS]
    if bad:
        p.error("--parts: unknown %s; the parts are %s" % (", ".join(bad), ",".join(PARTS)))
    for tool in ("gcc", "make"):
        if not shutil.which(tool):
            p.error("%s is not installed: the proof builds the shim and its C programs with it" % tool)

    report = Report(sys.stdout)
    proof = Proof(a, report)
    code = 1
    try:
        proof.run_all()
        c = report.counts
        report.section("Summary: %d passed, %d failed, %d skipped in %.0f s on the %s driver%s"
                       % (c["PASS"], c["FAIL"], c["SKIP"], time.monotonic() - proof.t0, "REAL" if proof.real else "SIMULATED",
                          "" if proof.production else "; NOT the production path: " + proof.not_production))
        code = 1 if c["FAIL"] else 0
    finally:
        Child.stop_all()
        proof.remove_mount_points()
        os.makedirs(os.path.dirname(os.path.abspath(a.report)), exist_ok=True)
        with open(a.report, "w") as f:
            f.write(report.text())
        print("report written to %s" % os.path.abspath(a.report), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
