#!/usr/bin/env python3
"""A claim's container as the node plugin's CDI spec makes it
(nodeplugin/cdispec.Build), for make gpu-proof: the spec's environment and
mounts, and a launcher that runs a program in a private mount namespace with
those mounts, so the shim is loaded by /etc/ld.so.preload and reads the
claim's limits from the read-only /run/gpuslice/gpuslice.limits, as in a
pod. The GPU's device nodes and the driver's files are the host's own here
(the spec mounts the same files), so they are not mounted again.

make test holds spec() to cdispec.Build: TestContainerMatchesCDISpec
compares the environment and the mounts (paths and options) for a
slice, an any-size share, a time-sliced claim and a MIG instance.

  container.py spec KIND ...       the environment and mounts, as JSON
  container.py run SPEC -- ARGV    ARGV in a new mount namespace with them
                                   (root: unshare(2) and mount(2))
"""
import argparse
import ctypes
import json
import os
import sys

LIBRARY_DIR = "/usr/local/lib/gpuslice"
LIBRARY = LIBRARY_DIR + "/libgpuslice.so"
PRELOAD = "/etc/ld.so.preload"
ACCOUNTING_DIR = "/run/gpuslice"
LIMITS = ACCOUNTING_DIR + "/gpuslice.limits"
PRELOAD_CONTENT = LIBRARY + "\n"
SIM_STATE = "/dev/gpuslice-simulated-gpu"
# A container's /run is its own: a runtime gives it a fresh one. So is the
# launcher's (a tmpfs in its namespace), and the mount points under it are
# made there, never in the host's /run, where others (make test's real
# nodes) make and remove /run/gpuslice at their own times.
RUN = "/run"

RO = ["ro", "nosuid", "nodev", "bind"]
RW_DATA = ["rw", "nosuid", "nodev", "noexec", "bind"]
RO_DATA = ["ro", "nosuid", "nodev", "noexec", "bind"]

# <sys/mount.h>, <sched.h>
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
CLONE_NEWNS = 0x20000
FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}


def spec(kind, uuid, shim="", preload="", accounting="", limit=0, share=0, sim_state="", mig=None):
    """The environment and mounts cdispec.Build gives a claim of one GPU.
    kind: "limited" (a partition or any-size share: the shim, its limits),
    "time-sliced" (the GPU whole, nothing of the shim) or "mig" (mig: the
    instance's uuid, profile, memory and, for a simulated GPU, its parent's
    name and compute capability)."""
    if kind == "mig":
        env = ["GPUSLICE_GPU_UUID=" + uuid, "CUDA_VISIBLE_DEVICES=" + mig["uuid"], "NVIDIA_VISIBLE_DEVICES=" + mig["uuid"]]
        if mig.get("simulated"):
            env += ["FAKEGPU_NAME=" + mig["gpuName"], "FAKEGPU_UUID=" + uuid,
                    "FAKEGPU_COMPUTE_CAPABILITY=" + mig["computeCapability"], "FAKEGPU_MIG_UUID=" + mig["uuid"],
                    "FAKEGPU_MIG_PROFILE=" + mig["profile"], "FAKEGPU_MIG_MEMORY=%d" % mig["memory"]]
        return {"env": env, "mounts": []}
    env = ["GPUSLICE_GPU_UUID=" + uuid, "CUDA_VISIBLE_DEVICES=" + uuid, "NVIDIA_VISIBLE_DEVICES=" + uuid]
    mounts = []
    if kind == "limited":
        env = ["GPUSLICE_MEMORY_LIMIT=%d" % limit, "GPUSLICE_COMPUTE_SHARE=%d" % share,
               "GPUSLICE_ACCOUNTING_DIR=" + ACCOUNTING_DIR] + env
        mounts = [
            {"hostPath": shim, "containerPath": LIBRARY, "options": RO},
            {"hostPath": preload, "containerPath": PRELOAD, "options": RO},
            {"hostPath": accounting, "containerPath": ACCOUNTING_DIR, "options": RW_DATA},
            # the limits, read-only on top of the read-write directory
            {"hostPath": os.path.join(accounting, "gpuslice.limits"), "containerPath": LIMITS, "options": RO_DATA},
        ]
    elif kind != "time-sliced":
        raise ValueError("kind %r: want limited, time-sliced or mig" % kind)
    if sim_state:
        env.append("FAKEGPU_STATE=" + SIM_STATE)
        mounts.append({"hostPath": sim_state, "containerPath": SIM_STATE, "options": RW_DATA})
    return {"env": env, "mounts": mounts}


def mount_points(s):
    """The container paths of a spec's mounts that do not exist on this
    machine, parents first, as (path, is a directory): a container runtime
    makes them in the container's root file system; here they are made on
    the host's (empty), and removed by the harness afterwards. A mount
    inside an earlier one's (the limits file in the accounting directory)
    has its point there; one under /run has it in the launcher's own /run
    (RUN)."""
    out, seen, mounted = [], set(), []
    for m in s["mounts"]:
        dst = m["containerPath"]
        if any(dst.startswith(d + "/") for d in mounted + [RUN]):
            continue
        mounted.append(dst)
        parts = dst.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p not in seen and not os.path.lexists(p):
                seen.add(p)
                out.append((p, i < len(parts) or os.path.isdir(m["hostPath"])))
    return out


def run(s, argv):
    """argv in a new mount namespace with the spec's mounts and environment
    (added to this one's, as a runtime adds them to the image's)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(ok, what):
        if ok != 0:
            e = ctypes.get_errno()
            raise SystemExit("container.py: %s: %s" % (what, os.strerror(e)))

    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS) (needs root)")
    # nothing mounted here may reach the host's namespace: above all not the
    # preload, which would load the shim into every process on the machine
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    check(libc.mount(b"tmpfs", RUN.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755"), "a private tmpfs at " + RUN)
    for m in s["mounts"]:
        src, dst = m["hostPath"].encode(), m["containerPath"].encode()
        if m["containerPath"].startswith(RUN + "/") and not os.path.lexists(m["containerPath"]):
            if os.path.isdir(m["hostPath"]):
                os.makedirs(m["containerPath"])
            else:
                os.makedirs(os.path.dirname(m["containerPath"]), exist_ok=True)
                open(m["containerPath"], "x").close()
        check(libc.mount(src, dst, None, MS_BIND, None), "bind %s at %s" % (m["hostPath"], m["containerPath"]))
        flags = MS_REMOUNT | MS_BIND
        for o in m["options"]:
            flags |= FLAGS.get(o, 0)
        check(libc.mount(None, dst, None, flags, None), "remount %s %s" % (m["containerPath"], ",".join(m["options"])))
    env = dict(os.environ)
    env.update(e.split("=", 1) for e in s["env"])
    os.execvpe(argv[0], argv, env)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("spec")
    sp.add_argument("kind", choices=["limited", "time-sliced", "mig"])
    sp.add_argument("--uuid", required=True)
    sp.add_argument("--shim", default="")
    sp.add_argument("--preload", default="")
    sp.add_argument("--accounting", default="")
    sp.add_argument("--limit", type=int, default=0)
    sp.add_argument("--share", type=int, default=0)
    sp.add_argument("--sim-state", default="")
    sp.add_argument("--mig", default="", help="JSON: uuid, profile, memory, simulated, gpuName, computeCapability")
    r = sub.add_parser("run")
    r.add_argument("spec", help="a file holding spec()'s JSON")
    r.add_argument("argv", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if a.cmd == "spec":
        json.dump(spec(a.kind, a.uuid, a.shim, a.preload, a.accounting, a.limit, a.share, a.sim_state,
                       json.loads(a.mig) if a.mig else None), sys.stdout)
        print()
        return 0
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    with open(a.spec) as f:
        run(json.load(f), argv)


if __name__ == "__main__":
    sys.exit(main())
