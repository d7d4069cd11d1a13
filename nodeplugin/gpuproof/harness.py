"""What make gpu-proof's parts share: the report, the programs it starts
(in a claim's container where the claim has one) and the parsing of their
output."""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

MiB = 1 << 20
GiB = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))


class Failed(Exception):
    """A step that could not produce its figures; the check fails with it."""


def mib(n):
    return "%d MiB" % (n // MiB)


def kv(line):
    """The key=value fields of a line (name= takes the rest of the line)."""
    out = {}
    rest = line
    if " name=" in rest:
        rest, name = rest.split(" name=", 1)
        out["name"] = name
    for tok in rest.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def json_out(text):
    """The JSON document a program printed, after any lines it logged first."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError("no JSON in: " + text.strip()[-300:])
    return json.loads(text[min(starts):])


def last_json(text):
    """The last JSON line of a program's output (warnings may come after)."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in: " + text.strip()[-300:])


class Report:
    def __init__(self, stream):
        self.stream = stream
        self.lines = []
        self.counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        self.tag = ""  # the GPU, driver and CUDA version every figure was measured on

    def out(self, text=""):
        for line in text.split("\n"):
            self.lines.append(line)
            print(line, file=self.stream, flush=True)

    def section(self, title):
        self.out("")
        self.out("== " + title)

    def sub(self, title):
        self.out("-- " + title)

    def check(self, ok, name, detail=""):
        status = "PASS" if ok else "FAIL"
        self.counts[status] += 1
        self.out("%s  %s%s%s" % (status, name, ": " + detail if detail else "", " [%s]" % self.tag if self.tag else ""))
        return ok

    def fail(self, name, detail):
        return self.check(False, name, detail)

    def skip(self, name, why):
        self.counts["SKIP"] += 1
        self.out("SKIP  %s: skipped: %s" % (name, why))

    def info(self, text):
        self.out("      " + text.replace("\n", "\n      "))

    def text(self):
        return "\n".join(self.lines) + "\n"


class ClaimEnv(dict):
    """The environment of a process of a claim, with the claim: its host
    accounting directory and, on the production path, the spec of its
    container (container.py), which the process is started in."""

    def __init__(self, env, directory, spec_file=None):
        super().__init__(env)
        self.dir = directory
        self.spec_file = spec_file


def in_claim(argv, env):
    """argv as started for env: in the claim's container when it has one."""
    if isinstance(env, ClaimEnv) and env.spec_file:
        return [sys.executable, os.path.join(HERE, "container.py"), "run", env.spec_file, "--"] + list(argv)
    return list(argv)


class Child:
    """A program whose lines are read as they come, for the protocols that
    need one process to wait on another (and kill -9 it)."""

    live = []

    def __init__(self, argv, env, name):
        self.name = name
        self.out = []
        self.q = queue.Queue()
        self.p = subprocess.Popen(in_claim(argv, env), env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True)
        Child.live.append(self)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def expect(self, prefix, timeout):
        """The next line starting with prefix (a JSON line counts as its event)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failed("%s printed no %r within %.0f s; its output: %s" % (self.name, prefix, timeout, self.tail()))
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.p.wait()
                raise Failed("%s exited (status %s) before printing %r; its output: %s"
                             % (self.name, self.p.returncode, prefix, self.tail()))
            self.out.append(line)
            if line.startswith(prefix):
                return line
            if line.startswith("{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("event") == prefix:
                    return ev

    def send(self, line):
        try:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def tail(self):
        return " | ".join(self.out[-6:]) or "(nothing)"

    def kill9(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait()

    def close(self, timeout=30):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        if self in Child.live:
            Child.live.remove(self)

    @classmethod
    def stop_all(cls):
        for c in list(cls.live):
            c.kill9()
            cls.live.remove(c)
