"""The parts of make gpu-proof that prove the production path as a pod has
it: the shim loaded by /etc/ld.so.preload in a mount namespace and the
limits read-only at /run/gpuslice/gpuslice.limits; a consumed-capacity
(any-size) slice; a time-sliced pair; MIG; and that the GPU is idle before
the compute share is measured. Each takes the running proof (gpu_proof.Proof).
"""
import json
import os
import sys
import time

import container
import plugin_files
from harness import MiB, Child, Failed, kv, mib

HERE = os.path.dirname(os.path.abspath(__file__))
MEMORY_STEP = 256 * MiB  # contract.MemoryStep: an any-size request's granularity

# Run in a claim's container: what a tenant sees of the shim and its limits,
# and what it can do to the limits file.
PROBE = r"""
import errno, json, os, sys
limits, region = sys.argv[1], sys.argv[2]
out = {"ld_preload": os.environ.get("LD_PRELOAD", ""),
       "mapped": any(sys.argv[3] in l for l in open("/proc/self/maps")), "attempts": {}}
def attempt(name, fn):
    try:
        fn()
        out["attempts"][name] = "allowed"
    except OSError as e:
        out["attempts"][name] = errno.errorcode.get(e.errno, str(e.errno))
if os.path.exists(limits):
    attempt("write", lambda: open(limits, "r+b").write(b"\0" * 8))
    attempt("chmod", lambda: os.chmod(limits, 0o666))
    def replace():
        with open(limits + ".new", "wb") as f:
            f.write(b"\0" * 128)
        try:
            os.rename(limits + ".new", limits)
        finally:
            if os.path.exists(limits + ".new"):
                os.unlink(limits + ".new")
    attempt("replace", replace)
    attempt("unlink", lambda: os.unlink(limits))
    attempt("write the region", lambda: open(region, "r+b").close())
print(json.dumps(out))
"""


def probe(p, env):
    """What PROBE sees in env's container."""
    if env.spec_file:
        limits, region = container.LIMITS, os.path.join(container.ACCOUNTING_DIR, "gpuslice.region")
    else:
        limits, region = os.path.join(env.dir, "gpuslice.limits"), os.path.join(env.dir, "gpuslice.region")
    rc, o = p.run([sys.executable, "-c", PROBE, limits, region, "libgpuslice.so"], env)
    if rc:
        raise Failed("the probe in the claim's container: %s" % o.strip()[-300:])
    return json.loads(o.strip().splitlines()[-1])


def views(p, env, argv_prefix=()):
    """cuMemGetInfo_v2's (total, free) and NVML's total in env's claim."""
    rc, o = p.run(list(argv_prefix) + p.cuda("view"), env, timeout=120)
    lines = {kv(l).get("api"): kv(l) for l in o.splitlines() if l.startswith("view ")}
    cu = lines.get("cuMemGetInfo_v2")
    if rc or not cu or cu.get("rc") != "0":
        raise Failed("gpuproof-cuda view: %s" % o.strip()[-300:])
    nv = lines.get("nvmlDeviceGetMemoryInfo", {})
    return int(cu["total"]), int(cu["free"]), int(nv["total"]) if nv.get("rc") == "0" else None


def production_path(p):
    r = p.r
    limit = p.total * 25 // 100
    r.section("The production path: a 25 %% slice's container, %s" % (
        "the shim through /etc/ld.so.preload, the limits read-only" if p.production else "NOT PROVED: " + p.not_production))
    names = ["the shim is loaded through /etc/ld.so.preload, with nothing in LD_PRELOAD",
             "the limits file cannot be written, replaced or removed in the container",
             "a limits file of the tenant's own, named in GPUSLICE_ACCOUNTING_DIR, is not the claim's"]
    if not p.production:
        for n in names:
            r.skip(n, p.not_production)
    else:
        p.fresh_gpu()
        env = p.claim(limit, 25)
        with open(os.path.join(env.dir, "gpuslice.limits"), "rb") as f:
            before = f.read()
        try:
            seen = probe(p, env)
            r.check(seen["mapped"] and not seen["ld_preload"], names[0],
                    "libgpuslice.so in the process's maps: %s; LD_PRELOAD %r" % (seen["mapped"], seen["ld_preload"]))
            a = seen["attempts"]
            with open(os.path.join(env.dir, "gpuslice.limits"), "rb") as f:
                after = f.read()
            refused = all(a.get(k) in ("EROFS", "EBUSY", "EPERM", "EACCES") for k in ("write", "chmod", "replace", "unlink"))
            r.check(refused and after == before and a.get("write the region") == "allowed", names[1],
                    "%s; the file unchanged: %s" % (", ".join("%s: %s" % kv_ for kv_ in a.items()), after == before))
            forged = os.path.join(p.claims, "forged-%d" % p.nclaims)
            plugin_files.prepare(forged, p.total, 100)
            total, _, _ = views(p, env, ["env", "GPUSLICE_ACCOUNTING_DIR=" + forged, "GPUSLICE_MEMORY_LIMIT=%d" % p.total])
            r.check(total == limit, names[2], "with a limits file of the whole GPU (%s) in its own directory, "
                    "cuMemGetInfo_v2 total %s (want the slice's %s)" % (mib(p.total), mib(total), mib(limit)))
        except (Failed, ValueError, KeyError) as e:
            r.fail("the production path", str(e))
    # this one holds on both paths: the shim reads the limits file, the
    # environment may only lower them
    p.fresh_gpu()
    name = "a process raising GPUSLICE_MEMORY_LIMIT gets the limits file's"
    try:
        total, _, _ = views(p, p.claim(limit, 25), ["env", "GPUSLICE_MEMORY_LIMIT=%d" % p.total])
        r.check(total == limit, name, "GPUSLICE_MEMORY_LIMIT=%d (the whole GPU): cuMemGetInfo_v2 total %s (want %s)"
                % (p.total, mib(total), mib(limit)))
    except Failed as e:
        r.fail(name, str(e))


def any_size(p):
    """A consumed-capacity share: memory in MemoryStep steps, compute in
    percent, neither a published fraction."""
    r = p.r
    limit = p.total * 37 // 100 // MEMORY_STEP * MEMORY_STEP
    share = 30
    r.section("Any-size slice (consumed capacity): %s of %s, compute %d %%" % (mib(limit), mib(p.total), share))
    p.fresh_gpu()
    name = "cuMemGetInfo_v2 and NVML report the any-size slice"
    try:
        total, _, nv = views(p, p.claim(limit, share))
        r.check(total == limit and nv == limit, name, "cuMemGetInfo_v2 total %s, nvmlDeviceGetMemoryInfo total %s (want %s)"
                % (mib(total), mib(nv) if nv is not None else "?", mib(limit)))
    except Failed as e:
        r.fail(name, str(e))
    name = "cuMemAlloc_v2 allocates up to the any-size slice and is refused past it"
    env = p.claim(limit, share)
    try:
        rc, o = p.run(p.cuda("fill", "linear", 256), env, timeout=120)
        line = next((kv(l) for l in o.splitlines() if l.startswith("fill ")), None)
        if rc or not line:
            raise Failed("gpuproof-cuda fill linear: %s" % o.strip()[-300:])
        got, reg = int(line["allocated"]), p.region(env)
        r.check(line["next"] == "CUDA_ERROR_OUT_OF_MEMORY" and reg and reg["high"] <= limit
                and p.up_to_slice(got, limit, 256 * MiB), name, "%s in %s blocks, the next: %s; region high-water %s of %s"
                % (mib(got), line["blocks"], line["next"], mib(reg["high"]) if reg else "?", mib(limit)))
    except Failed as e:
        r.fail(name, str(e))
    p.fresh_gpu()
    secs = p.a.compute_seconds
    r.sub("a spin kernel at the any-size share, %g s" % secs)
    idle(p)
    p.share_loop(lambda: p.cuda("spin", secs, 500, 20), lambda o: kv(next(
        l for l in o.splitlines() if l.startswith("spin ")))["kernels"], [share], "kernels", limit=limit)


def time_sliced(p):
    """Two time-sliced claims on the GPU: each its container without the
    shim (the CDI spec gives them none), each seeing the whole GPU and what
    the other holds on it."""
    r = p.r
    r.section("Time-sliced pair: two claims sharing the whole GPU, without limits")
    p.fresh_gpu()
    a_env, b_env = p.claim(0, 0, kind="time-sliced"), p.claim(0, 0, kind="time-sliced")
    hold = 1024
    A = None
    try:
        A = Child(p.cuda("hold", hold), a_env, "the first time-sliced claim's process")
        A.expect("holding", p.left(120))
        total, free, _ = views(p, b_env)
        r.check(total == p.card["total"], "the second claim sees the whole GPU",
                "cuMemGetInfo_v2 total %s (the GPU's %s)" % (mib(total), mib(p.card["total"])))
        r.check(free <= total - hold * MiB, "the second claim sees the first's memory on the GPU",
                "free %s of %s while the first holds %d MiB" % (mib(free), mib(total), hold))
        seen = probe(p, b_env)
        r.check(not seen["mapped"] and not seen["ld_preload"], "nothing of the shim in a time-sliced claim's container",
                "libgpuslice.so in the process's maps: %s; LD_PRELOAD %r%s" % (
                    seen["mapped"], seen["ld_preload"], "" if p.production else " (not in a container: not root)"))
        r.check(A.p.poll() is None, "the first claim's process runs on beside it", "still holding %d MiB" % hold)
    except (Failed, ValueError, KeyError) as e:
        r.fail("time-sliced pair", str(e))
    finally:
        if A:
            A.close(5)


def mig(p):
    """MIG: detect the mode; on a GPU in MIG mode, a MIG claim's container
    on its first instance (no shim: the hardware holds it)."""
    r = p.r
    g = p.gpu
    r.section("MIG")
    r.info("NVML: MIG mode %s on %s [%s]" % (g["migMode"], g["name"], r.tag))
    if p.real and not g["migMode"].startswith("enabled"):
        r.skip("MIG", "MIG mode is %s on this GPU: MIG was not proved (on an A100, H100 or later: nvidia-smi -i 0 -mig 1, "
                      "create instances, run again)" % g["migMode"])
        return
    if p.real:
        if not r.check(len(g["migDevices"]) >= 1, "NVML lists the GPU's MIG instances",
                       ", ".join("%s %s %s" % (m["uuid"], m["name"], mib(m["memoryBytes"])) for m in g["migDevices"])
                       or "none: create instances (nvidia-smi mig -cgi ... -C)"):
            return
        m = g["migDevices"][0]
        inst = {"uuid": m["uuid"], "memory": m["memoryBytes"]}
    else:
        r.info("the simulated GPU has no MIG: these checks run on a simulated A100 instance, the fake driver told of it "
               "as a MIG claim's CDI spec tells it. Not a proof of MIG on silicon.")
        inst = {"uuid": "MIG-5f0c0dd8-0000-4000-8000-0000000000b1", "memory": 4864 * MiB, "simulated": True,
                "profile": "1g.5gb", "gpuName": "NVIDIA A100-SXM4-40GB", "computeCapability": "8.0"}
    env = p.claim(0, 0, kind="mig", mig=inst)
    try:
        if not p.real:
            rc, o = p.run([sys.executable, os.path.join(HERE, "nvml.py"), "gpu"], env)
            seen = json.loads(o[o.index("{"):]) if rc == 0 else {}
            r.check(seen.get("migMode") == "enabled" and [d["uuid"] for d in seen.get("migDevices", [])] == [inst["uuid"]],
                    "NVML in the MIG claim's container shows MIG mode and its instance",
                    "MIG mode %s, instances %s" % (seen.get("migMode"), [d["uuid"] for d in seen.get("migDevices", [])]))
        total, _, _ = views(p, env)
        # CUDA's total for a MIG device and NVML's differ by the driver's
        # own reserve on some drivers
        r.check(inst["memory"] * 0.95 <= total <= inst["memory"], "the MIG claim's CUDA sees its instance",
                "cuMemGetInfo_v2 total %s (the instance's %s)" % (mib(total), mib(inst["memory"])))
        rc, o = p.run(p.cuda("fill", "linear", 256), env, timeout=120)
        line = next((kv(l) for l in o.splitlines() if l.startswith("fill ")), None)
        got = int(line["allocated"]) if line else 0
        # up to the instance, less what the driver's context takes of it
        r.check(rc == 0 and line and line["next"] == "CUDA_ERROR_OUT_OF_MEMORY" and inst["memory"] * 3 // 4 <= got <= inst["memory"],
                "allocations stop at the instance, without the shim", "%s of its %s allocated, the next: %s" % (
                    mib(got), mib(inst["memory"]), line["next"]) if line else o.strip()[-300:])
        seen = probe(p, env)
        r.check(not seen["mapped"], "nothing of the shim in a MIG claim's container",
                "libgpuslice.so in the process's maps: %s" % seen["mapped"])
    except (Failed, ValueError, KeyError) as e:
        r.fail("MIG", str(e))


def idle(p, samples=5):
    """Whether the GPU does nothing else: no compute process, utilisation
    about 0 over a second. Before the compute share is measured."""
    seen, util = set(), []
    for _ in range(samples):
        g = p.nvml("gpu")
        seen |= {x["pid"] for x in g["processes"]}
        if g["utilization"] is not None:
            util.append(g["utilization"])
        time.sleep(1.0 / samples)
    ok = not seen and (not util or max(util) <= 5)
    p.r.check(ok, "the GPU is idle before the compute-share run", "%d compute processes (%s), utilisation at most %s over "
              "%d samples in 1 s%s" % (len(seen), ", ".join(map(str, sorted(seen))) or "none",
                                        "%d %%" % max(util) if util else "unreadable", samples,
                                        "" if ok else ": the shares below are measured against a busy GPU"))
    return ok
