#!/usr/bin/env bash
# gpucheck.sh: checks libgpuslice.so against a real NVIDIA GPU and driver.
#
# Builds the library with the machine's gcc, then, with an 8 GiB limit:
#   - the real nvidia-smi reports 8192 MiB total;
#   - the driver API (cuMemGetInfo_v2, cuDeviceTotalMem_v2) and NVML report 8 GiB;
#   - PyTorch's torch.cuda.mem_get_info() reports 8 GiB total;
#   - PyTorch allocating 7 GiB works, 9 GiB raises out-of-memory;
# and measures what one CUDA context really costs on this GPU (to compare
# with GPUSLICE_CONTEXT_OVERHEAD, 300 MiB by default).
#
# Usage: nodeplugin/shim/gpucheck.sh [build-dir]   (needs gcc, make, a GPU;
# PyTorch with CUDA for its checks, skipped without it). Exit status 1 if a
# check failed. Nothing on the machine is changed: the library is loaded with
# LD_PRELOAD and the accounting region lives in a temporary directory.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(mktemp -d)}
acct=$(mktemp -d)
limit=$((8 * 1024 * 1024 * 1024))
failed=0

pass() { printf 'PASS  %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failed=1; }
skip() { printf 'SKIP  %s\n' "$*"; }

echo "== build into $out"
make -s -C "$here" OUT="$out" -j"$(nproc)" || { echo "build failed"; exit 1; }
lib=$out/libgpuslice.so

command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: not a GPU machine"; exit 1; }
nvidia-smi -L
gpu_total=$(nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -d ' ')
echo "GPU 0 without the library: ${gpu_total} MiB"

# the claim's environment, as the node plugin's CDI spec sets it
in_claim() {
	env GPUSLICE_MEMORY_LIMIT=$limit GPUSLICE_ACCOUNTING_DIR="$acct" CUDA_VISIBLE_DEVICES=0 \
		LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
}

echo "== nvidia-smi with the library"
in_claim nvidia-smi -i 0
total=$(in_claim nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -d ' ')
if [ "$total" = 8192 ]; then pass "nvidia-smi memory.total = 8192 MiB"; else fail "nvidia-smi memory.total = '$total' MiB, want 8192"; fi
if in_claim nvidia-smi -i 0 | grep -q '/ *8192MiB'; then pass "nvidia-smi table shows 8192MiB"; else fail "nvidia-smi table does not show 8192MiB"; fi

echo "== driver API and NVML with the library (gs_probe info)"
info=$(in_claim "$out/gs_probe" info 2>&1)
echo "$info"
for api in cuMemGetInfo_v2 cuDeviceTotalMem_v2 nvmlDeviceGetMemoryInfo_v2; do
	t=$(echo "$info" | awk -v a="$api" '$1 == a { for (i = 2; i <= NF; i++) if ($i ~ /^total=/) { sub("total=", "", $i); print $i } }')
	if [ "$t" = "$limit" ]; then pass "$api total = $limit"; else fail "$api total = '$t', want $limit"; fi
done

echo "== what one CUDA context costs on this GPU (without the library)"
coproc PROBE { env CUDA_VISIBLE_DEVICES=0 "$out/gs_probe" interactive; }
read -r ready pid <&"${PROBE[0]}"
sleep 1
ctx=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', *' -v p="$pid" '$1 == p { print $2 }')
echo "exit" >&"${PROBE[1]}"
wait "$PROBE_PID" 2>/dev/null
echo "context of a driver-API process: ${ctx:-unknown} MiB (the library charges GPUSLICE_CONTEXT_OVERHEAD, default 300 MiB)"

echo "== PyTorch with the library"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	skip "PyTorch with CUDA is not installed here"
else
	py() { in_claim python3 -c "$1" 2>&1; }
	r=$(py 'import torch; f, t = torch.cuda.mem_get_info(); print("mem_get_info", f, t)')
	echo "$r"
	t=$(echo "$r" | awk '$1 == "mem_get_info" { print $3 }')
	if [ "$t" = "$limit" ]; then pass "torch.cuda.mem_get_info() total = 8 GiB"; else fail "torch.cuda.mem_get_info() total = '$t', want $limit"; fi
	r=$(py 'import torch; x = torch.empty(7 * 2**30, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize(); print("allocated", x.numel())')
	echo "$r" | tail -2
	if echo "$r" | grep -q '^allocated 7516192768'; then pass "PyTorch allocates 7 GiB"; else fail "PyTorch could not allocate 7 GiB"; fi
	r=$(py 'import torch
try:
    x = torch.empty(9 * 2**30, dtype=torch.uint8, device="cuda")
    print("allocated", x.numel())
except torch.cuda.OutOfMemoryError as e:
    print("OOM", str(e).splitlines()[0])')
	echo "$r" | tail -2
	if echo "$r" | grep -q '^OOM'; then pass "PyTorch allocating 9 GiB raises out-of-memory"; else fail "PyTorch allocating 9 GiB did not raise out-of-memory"; fi
fi

rm -rf "$acct"
[ $# -ge 1 ] || rm -rf "$out"
if [ $failed = 0 ]; then echo "all checks passed"; else echo "some checks FAILED"; fi
exit $failed
