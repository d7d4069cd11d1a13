#!/usr/bin/env python3
"""The node plugin's enforcer (nodeplugin/enforce), for make gpu-proof on a
GPU machine without Go: every sample it reads NVML's processes on each GPU,
charges them to claims by their pods, writes each claim's observed memory
into its limits file, and stops (SIGKILL through a pidfd) the process that
took a claim past its limit on a GPU, the one that grew most first, until
the claim is under. A process it stopped is not counted again while NVML
still lists it, for DYING_NS.

Sample() follows enforce.(*Enforcer).Sample step for step. make test holds
the two to the same decisions: TestEnforcerMatchesNodePlugin replays the same
samples through both (replay below) and compares every kill and every
observation written into the limits files.

  enforcer.py enforce --limit BYTES --limits-file PATH
      one claim of BYTES on every GPU outside MIG mode, whose processes are
      the PIDs given on stdin ("pid N" lines); a JSON line per event
  enforcer.py replay < scenario.json
      the decisions for NVML process lists given in the scenario
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

from plugin_files import Observer, read_observation

PERIOD_S = 0.2  # enforce.Period
DYING_NS = 5 * 10**9  # enforce's dying


class Gone(Exception):
    """The process exited, or its PID is another process's now (enforce.ErrGone)."""


def signal_pid(pid, mine):
    """enforce.Signal: SIGKILL through a pidfd, once mine() (asked after the
    pidfd is open) says the PID still is the process to stop."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        raise Gone()
    try:
        if not mine():
            raise Gone()
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except ProcessLookupError:
            raise Gone()
    finally:
        os.close(fd)


class Enforcer:
    """claims() returns dicts: uid, pods (list of pod UIDs), gpus ({uuid:
    limit bytes}), limits_file ("" for none). processes(uuid) returns NVML's
    [(pid, used)] or raises; pod_of(pid) is the pod of a process ("" for
    none); stop(pid, pod) raises Gone or another error."""

    def __init__(self, gpus, claims, processes, pod_of, stop, on_kill=None, clock=time.time_ns):
        self.gpus, self.claims, self.processes = gpus, claims, processes
        self.pod_of, self.stop, self.on_kill, self.clock = pod_of, stop, on_kill, clock
        self.prev = {}    # (gpu, pid) -> used at the previous sample
        self.killed = {}  # (gpu, pid) -> when it was stopped
        self.observers = {}

    def sample(self):
        start = self.clock()
        claims = sorted(self.claims(), key=lambda c: c["uid"])
        observed = [0] * len(claims)
        complete = [True] * len(claims)
        prev = {}
        kills = []
        for uuid in self.gpus:
            pods = [c["pods"] if uuid in c["gpus"] else None for c in claims]
            limit = [c["gpus"].get(uuid, 0) for c in claims]
            try:
                procs = self.processes(uuid)
            except Exception:
                for i in range(len(claims)):
                    if pods[i] is not None:
                        complete[i] = False
                continue
            owners = {}
            for i, ps in enumerate(pods):
                for p in ps or []:
                    owners.setdefault(p, i)
            mine = [[] for _ in claims]
            pod_of = {}
            for pid, used in procs:
                k = (uuid, pid)
                prev[k] = used
                at = self.killed.get(k)
                if at is not None and start - at < DYING_NS:
                    continue  # stopped; its memory is on its way back
                pod = self.pod_of(pid)
                i = owners.get(pod, -1) if pod else -1
                if i < 0:
                    continue
                pod_of[pid] = pod
                grew = used - self.prev.get(k, 0) if used > self.prev.get(k, 0) else 0
                mine[i].append({"pid": pid, "used": used, "grew": grew})
            for i, c in enumerate(claims):
                if pods[i] is None:
                    continue
                used = sum(p["used"] for p in mine[i])
                if limit[i] > 0 and used > limit[i]:
                    for k in self.stop_over(c, uuid, limit[i], used, mine[i], pod_of, start):
                        kills.append(k)
                        if not k["error"]:
                            used -= k["used"]
                observed[i] += used
        self.prev = prev
        self.killed = {k: at for k, at in self.killed.items() if start - at < DYING_NS}
        self.observe(claims, observed, complete, start)
        return kills

    def stop_over(self, c, uuid, limit, used, procs, pod_of, sampled):
        procs.sort(key=lambda p: (-p["grew"], -p["used"], p["pid"]))
        kills = []
        for p in procs:
            if used <= limit:
                break
            k = {"event": "kill", "claim": c["uid"], "gpu": uuid, "pid": p["pid"], "used": p["used"], "grew": p["grew"],
                 "claimUsed": used, "limit": limit, "sampledUnixNs": sampled, "error": ""}
            try:
                self.stop(p["pid"], pod_of.get(p["pid"], ""))
            except Gone:
                k["error"] = "the process is gone"
            except OSError as e:
                k["error"] = "kill %d: %s" % (p["pid"], e)
            k["killedUnixNs"] = self.clock()
            if not k["error"]:
                used -= p["used"]
                self.killed[(uuid, p["pid"])] = k["killedUnixNs"]
            kills.append(k)
            if self.on_kill:
                self.on_kill(k)
            if k["error"]:
                break  # the next sample looks again
        return kills

    def observe(self, claims, observed, complete, at):
        seen = set()
        for i, c in enumerate(claims):
            seen.add(c["uid"])
            if not c.get("limits_file") or not complete[i]:
                continue
            o = self.observers.get(c["uid"])
            if o is None:
                try:
                    o = self.observers[c["uid"]] = Observer(c["limits_file"])
                except OSError:
                    continue
            o.observe(observed[i], at)
        for uid in [u for u in self.observers if u not in seen]:
            self.observers.pop(uid).close()

    def close(self):
        for o in self.observers.values():
            o.withdraw()
            o.close()
        self.observers = {}


def enforce(limit, limits_file):
    """One claim over the harness's PIDs on every GPU outside MIG mode, until
    stdin closes."""
    import nvml
    nv = nvml.NVML()
    found = nvml.discover(nv)
    gpus = [g["uuid"] for g in found["gpus"] if not g["migEnabled"]]
    if not gpus:
        raise SystemExit("enforcer.py: no GPU outside MIG mode")
    pids = set()
    lock = threading.Lock()
    out = threading.Lock()

    def emit(ev):
        with out:
            print(json.dumps(ev), flush=True)

    def pod_of(pid):
        with lock:
            return "gpu-proof" if pid in pids else ""

    claim = {"uid": "gpu-proof", "pods": ["gpu-proof"], "gpus": {u: limit for u in gpus}, "limits_file": limits_file}
    e = Enforcer(gpus, lambda: [claim], lambda u: nv.processes(nv.handle_by_uuid(u)), pod_of,
                 lambda pid, pod: signal_pid(pid, lambda: pod_of(pid) == pod), on_kill=emit)
    closed = threading.Event()

    def read():
        for line in sys.stdin:
            f = line.split()
            if len(f) == 2 and f[0] == "pid" and f[1].isdigit():
                with lock:
                    pids.add(int(f[1]))
            else:
                emit({"event": "error", "error": "stdin line %r, want \"pid N\"" % line})
        closed.set()

    threading.Thread(target=read, daemon=True).start()
    emit({"event": "ready"})
    n, total, worst = 0, 0, 0
    while not closed.wait(PERIOD_S):
        t0 = time.monotonic_ns()
        e.sample()
        d = time.monotonic_ns() - t0
        n, total, worst = n + 1, total + d, max(worst, d)
    e.close()
    emit({"event": "done", "samples": n, "sampleMeanNs": total // max(n, 1), "sampleMaxNs": worst})


def replay(scenario):
    """The decisions for a scenario: {"gpus": [uuid], "claims": [{uid, pods,
    gpus, limits_file}], "pods": {pid: pod}, "samples": [{"processes": {uuid:
    [[pid, used]]}, "unreadable": [uuid], "gone": [pid]}]}. A stopped process
    leaves NVML's list until the scenario lists it again. Per sample: the
    kills, and each claim's (observed_used, observed_seq) in its limits file."""
    pods = {int(k): v for k, v in scenario["pods"].items()}
    listed = {}
    state = {}

    def processes(uuid):
        if uuid in state["unreadable"]:
            raise OSError("unreadable")
        return [tuple(p) for p in listed.get(uuid, [])]

    def stop(pid, pod):
        if pid in state["gone"] or pods.get(pid) != pod:
            raise Gone()
        for u in listed:
            listed[u] = [p for p in listed[u] if p[0] != pid]

    e = Enforcer(scenario["gpus"], lambda: scenario["claims"], processes, lambda pid: pods.get(pid, ""), stop)
    out = []
    for s in scenario["samples"]:
        listed.clear()
        listed.update(s["processes"])
        state["unreadable"], state["gone"] = s.get("unreadable", []), s.get("gone", [])
        kills = e.sample()
        out.append({"kills": [{"claim": k["claim"], "gpu": k["gpu"], "pid": k["pid"], "used": k["used"], "grew": k["grew"],
                               "claimUsed": k["claimUsed"], "limit": k["limit"], "gone": bool(k["error"])} for k in kills],
                    "observed": {c["uid"]: list(read_observation(c["limits_file"])) for c in scenario["claims"]}})
    e.close()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    en = sub.add_parser("enforce")
    en.add_argument("--limit", type=int, required=True)
    en.add_argument("--limits-file", default="")
    sub.add_parser("replay")
    a = p.parse_args()
    if a.cmd == "enforce":
        enforce(a.limit, a.limits_file)
    else:
        json.dump(replay(json.load(sys.stdin)), sys.stdout)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
