#!/usr/bin/env python3
"""The parts of make gpu-proof that need a real GPU and Python's GPU stack
(PyTorch, CuPy, nvidia-ml-py). gpu_proof.py runs each command in its own
process, with libgpuslice.so preloaded as a claim's container has it (or
without, for the baselines), and reads its lines: JSON objects for results,
"key=value" lines for the two-process protocol it shares with
gpuproof-cuda.

  nvml-view                    what nvidia-ml-py reports of device 0's memory
  torch-view                   torch.cuda.mem_get_info() and the device's total_memory
  torch-fill --chunk-mib N     allocate N MiB tensors until PyTorch refuses one
                               (PYTORCH_CUDA_ALLOC_CONF picks the allocator), wait
                               for a line on stdin, free, allocate again
  torch-cublas                 fill the slice, then a first matmul (cuBLAS's handle
                               and workspace), wait for a line, free half, again
  torch-hog --mib N --churn-mib C    hold N MiB, then allocate and free C MiB without end
  torch-interactive            "alloc MIB" lines on stdin, one answer each
  torch-matmul --seconds S     a float16 4096x4096 matmul loop; iterations per second
  cupy-fill --chunk-mib N      CuPy's memory pool until refused; then a cuBLAS matmul

Nothing here runs without a GPU: on the simulated driver gpu_proof.py
reports these parts as skipped.
"""
import argparse
import json
import os
import sys
import time

MiB = 1 << 20


def say(**fields):
    print(json.dumps(fields), flush=True)


def first_line(e):
    s = str(e).strip().splitlines()
    return s[0][:300] if s else ""


def wait_for_line():
    sys.stdin.readline()


def oom_type(torch):
    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def cmd_nvml_view(a):
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    m = pynvml.nvmlDeviceGetMemoryInfo(h)
    say(event="nvml", total=int(m.total), used=int(m.used), free=int(m.free),
        module=getattr(pynvml, "__version__", "unknown"))
    pynvml.nvmlShutdown()


def cmd_torch_view(a):
    import torch

    free, total = torch.cuda.mem_get_info()
    p = torch.cuda.get_device_properties(0)
    say(event="view", free=int(free), total=int(total), total_memory=int(p.total_memory),
        device=p.name, torch=torch.__version__)


def cmd_torch_fill(a):
    import torch

    oom = oom_type(torch)
    chunk = a.chunk_mib * MiB
    free, total = torch.cuda.mem_get_info()
    blocks, err = [], None
    try:
        while True:
            blocks.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
    except Exception as e:  # the refusal is expected to be oom; any other type is the finding
        err = e
    torch.cuda.synchronize()
    try:
        reserved = int(torch.cuda.memory_reserved())
    except Exception:  # not every allocator backend keeps the statistic
        reserved = -1
    say(event="filled", pid=os.getpid(), allocated=len(blocks) * chunk, chunk=chunk,
        error_type=type(err).__name__, error=first_line(err), caught_oom=isinstance(err, oom),
        reserved=reserved, free=int(free), total=int(total),
        conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    del err
    wait_for_line()
    blocks.clear()
    torch.cuda.empty_cache()
    try:
        again = torch.empty(chunk, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        del again
        say(event="done", recovered=True)
    except Exception as e:
        say(event="done", recovered=False, error=first_line(e))


def cmd_torch_cublas(a):
    import torch

    oom = oom_type(torch)
    n = 4096
    x = torch.randn(n, n, device="cuda", dtype=torch.float16)
    y = torch.randn(n, n, device="cuda", dtype=torch.float16)
    out = torch.empty(n, n, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    fill = []
    try:
        while True:
            fill.append(torch.empty(2 * MiB, dtype=torch.uint8, device="cuda"))
    except oom:
        pass
    # cuBLAS's handle and workspace come with the first matmul; the
    # workspace stays allocated, so it is what the first matmul that ran
    # added to PyTorch's count
    before = torch.cuda.memory_allocated()
    workspace = -1
    try:
        torch.matmul(x, y, out=out)
        torch.cuda.synchronize()
        first, err = "ran", ""
        workspace = torch.cuda.memory_allocated() - before
    except oom as e:
        first, err = "OutOfMemoryError", first_line(e)
    except Exception as e:
        first, err = type(e).__name__, first_line(e)
    say(event="full", pid=os.getpid(), filled=len(fill) * 2 * MiB, first=first, error=err)
    wait_for_line()
    del fill[len(fill) // 2:]
    torch.cuda.empty_cache()
    try:
        before = torch.cuda.memory_allocated()
        torch.matmul(x, y, out=out)
        torch.cuda.synchronize()
        if workspace < 0:
            workspace = torch.cuda.memory_allocated() - before
        say(event="done", second="ran", workspace=int(workspace))
    except Exception as e:
        say(event="done", second=type(e).__name__, error=first_line(e))


def cmd_torch_hog(a):
    import torch

    oom = oom_type(torch)
    held = torch.empty(a.mib * MiB, dtype=torch.uint8, device="cuda")  # kept until killed
    torch.cuda.synchronize()
    print("holding pid=%d mib=%d" % (os.getpid(), a.mib), flush=True)
    while True:  # killed with -9 in here, between a cudaMalloc and a cudaFree
        try:
            churn = torch.empty(a.churn_mib * MiB, dtype=torch.uint8, device="cuda")
            del churn
        except oom:
            pass
        torch.cuda.empty_cache()


def cmd_torch_interactive(a):
    import torch

    oom = oom_type(torch)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print("ready pid=%d" % os.getpid(), flush=True)
    held = []
    for line in sys.stdin:
        f = line.split()
        if len(f) == 2 and f[0] == "alloc":
            try:
                held.append(torch.empty(int(f[1]) * MiB, dtype=torch.uint8, device="cuda"))
                torch.cuda.synchronize()
                rc = "CUDA_SUCCESS"
            except oom:
                rc = "OutOfMemoryError"
            except Exception as e:
                rc = type(e).__name__
            print("alloc mib=%s rc=%s" % (f[1], rc), flush=True)
        elif f and f[0] == "exit":
            break


def cmd_torch_matmul(a):
    import torch

    n = 4096
    x = torch.randn(n, n, device="cuda", dtype=torch.float16)
    y = torch.randn(n, n, device="cuda", dtype=torch.float16)
    out = torch.empty(n, n, device="cuda", dtype=torch.float16)

    def loop(seconds):
        it, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            for _ in range(10):
                torch.matmul(x, y, out=out)
            torch.cuda.synchronize()
            it += 10
        return it, time.monotonic() - t0

    loop(1.0)  # cuBLAS's kernels chosen and loaded, the pacer's first measurements
    it, wall = loop(a.seconds)
    say(event="matmul", iterations=it, seconds=wall, rate=it / wall, n=n, dtype="float16")


def cmd_cupy_fill(a):
    import cupy

    chunk = a.chunk_mib * MiB
    free, total = cupy.cuda.runtime.memGetInfo()
    blocks, err = [], None
    try:
        while True:
            blocks.append(cupy.empty((chunk,), dtype=cupy.uint8))
    except Exception as e:
        err = e
    cupy.cuda.Device(0).synchronize()
    say(event="filled", pid=os.getpid(), allocated=len(blocks) * chunk, chunk=chunk,
        error_type=type(err).__name__, error=first_line(err),
        caught_oom=isinstance(err, cupy.cuda.memory.OutOfMemoryError),
        free=int(free), total=int(total), cupy=cupy.__version__)
    del err
    wait_for_line()
    blocks.clear()
    cupy.get_default_memory_pool().free_all_blocks()
    try:
        again = cupy.empty((chunk,), dtype=cupy.uint8)
        del again
        m = cupy.random.rand(1024, 1024, dtype=cupy.float32)
        s = float((m @ m).sum())
        say(event="done", recovered=True, matmul=s > 0)
    except Exception as e:
        say(event="done", recovered=False, error=first_line(e))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("nvml-view").set_defaults(fn=cmd_nvml_view)
    sub.add_parser("torch-view").set_defaults(fn=cmd_torch_view)
    s = sub.add_parser("torch-fill")
    s.add_argument("--chunk-mib", type=int, default=256)
    s.set_defaults(fn=cmd_torch_fill)
    sub.add_parser("torch-cublas").set_defaults(fn=cmd_torch_cublas)
    s = sub.add_parser("torch-hog")
    s.add_argument("--mib", type=int, required=True)
    s.add_argument("--churn-mib", type=int, default=64)
    s.set_defaults(fn=cmd_torch_hog)
    sub.add_parser("torch-interactive").set_defaults(fn=cmd_torch_interactive)
    s = sub.add_parser("torch-matmul")
    s.add_argument("--seconds", type=float, default=3.0)
    s.set_defaults(fn=cmd_torch_matmul)
    s = sub.add_parser("cupy-fill")
    s.add_argument("--chunk-mib", type=int, default=256)
    s.set_defaults(fn=cmd_cupy_fill)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
