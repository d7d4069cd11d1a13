/*
 * gpuproof-cuda: the C half of make gpu-proof. A CUDA driver-API program that
 * runs the same on a real GPU and on the simulated driver of
 * nodeplugin/shim/fake (libcuda.so.1 found with dlopen, as the CUDA runtime
 * does; kernels are PTX the real driver compiles, and the simulated one runs
 * for as long as their first parameter says). gpu_proof.py runs it with and
 * without libgpuslice.so preloaded and reads its lines.
 *
 *   card                       the device's name and memory (run it without the shim)
 *   view                       what cuMemGetInfo_v2, cuDeviceTotalMem_v2 and NVML report
 *   fill PATH CHUNK_MIB        allocate CHUNK_MIB blocks through PATH until one is
 *                              refused, then free them; PATH: linear managed vmm async pool
 *   hold MIB                   allocate MIB, print "holding", wait for stdin to close
 *   hog MIB CHURN_MIB          allocate MIB, print "holding", then allocate and free
 *                              CHURN_MIB blocks without end (a process killed mid-allocation)
 *   interactive                "alloc MIB" lines on stdin, one answer each
 *   bench ALLOCS LAUNCHES      ns per cuMemAlloc_v2+cuMemFree_v2 pair and per launch
 *                              of an empty kernel (best of 5 rounds)
 *   spin SECONDS KERNEL_US BATCH   launch KERNEL_US-long kernels in batches of BATCH,
 *                              synchronising after each, for SECONDS after a warm-up
 *
 * Every answer is one line of key=value fields; the exit status is 0 unless
 * the program could not do what was asked (a refused allocation is an answer,
 * not an error).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../shim/include/gpuslice.h"
#include "../../shim/src/cuda_abi.h"

#define MiB (1024ull * 1024ull)
#define MAX_BLOCKS 8192

/* a kernel that spins on the global timer for its parameter's nanoseconds,
 * and one that does nothing */
static const char ptx[] = ".version 6.0\n"
			  ".target sm_50\n"
			  ".address_size 64\n"
			  ".visible .entry spin(.param .u64 ns)\n"
			  "{\n"
			  "  .reg .u64 %rd<5>;\n"
			  "  .reg .pred %p;\n"
			  "  ld.param.u64 %rd1, [ns];\n"
			  "  mov.u64 %rd2, %globaltimer;\n"
			  "LOOP:\n"
			  "  mov.u64 %rd3, %globaltimer;\n"
			  "  sub.u64 %rd4, %rd3, %rd2;\n"
			  "  setp.lt.u64 %p, %rd4, %rd1;\n"
			  "  @%p bra LOOP;\n"
			  "  ret;\n"
			  "}\n"
			  ".visible .entry empty()\n"
			  "{\n"
			  "  ret;\n"
			  "}\n";

static struct {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*device_name)(char *, int, CUdevice);
	CUresult (*total_mem)(size_t *, CUdevice);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*mem_get_info)(size_t *, size_t *);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*managed)(CUdeviceptr *, size_t, unsigned);
	CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*mem_release)(CUmemGenericAllocationHandle);
	CUresult (*addr_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*addr_free)(CUdeviceptr, size_t);
	CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*mem_unmap)(CUdeviceptr, size_t);
	CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
	CUresult (*alloc_from_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
	CUresult (*free_async)(CUdeviceptr, CUstream);
	CUresult (*pool_create)(CUmemoryPool *, const CUmemPoolProps *);
	CUresult (*pool_destroy)(CUmemoryPool);
	CUresult (*pool_trim)(CUmemoryPool, size_t);
	CUresult (*get_mem_pool)(CUmemoryPool *, CUdevice);
	CUresult (*stream_sync)(CUstream);
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
			   void **, void **);
	CUresult (*ctx_sync)(void);
	CUresult (*error_name)(CUresult, const char **);
} cu;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "gpuproof-cuda: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static const char *err_name(CUresult r)
{
	const char *s = NULL;
	if (cu.error_name && cu.error_name(r, &s) == CUDA_SUCCESS && s)
		return s;
	switch (r) {
	case CUDA_SUCCESS: return "CUDA_SUCCESS";
	case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
	case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
	case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
	}
	static char buf[32];
	snprintf(buf, sizeof buf, "CUresult_%d", r);
	return buf;
}

static void load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		die("cannot load libcuda.so.1: %s", dlerror());
#define SYM(field, name)                                         \
	do {                                                     \
		*(void **)&cu.field = dlsym(h, name);            \
		if (!cu.field)                                   \
			die("libcuda.so.1 lacks %s", name);      \
	} while (0)
	SYM(init, "cuInit");
	SYM(device_get, "cuDeviceGet");
	SYM(device_name, "cuDeviceGetName");
	SYM(total_mem, "cuDeviceTotalMem_v2");
	SYM(retain, "cuDevicePrimaryCtxRetain");
	SYM(set_current, "cuCtxSetCurrent");
	SYM(mem_get_info, "cuMemGetInfo_v2");
	SYM(alloc, "cuMemAlloc_v2");
	SYM(free, "cuMemFree_v2");
	SYM(managed, "cuMemAllocManaged");
	SYM(mem_create, "cuMemCreate");
	SYM(mem_release, "cuMemRelease");
	SYM(addr_reserve, "cuMemAddressReserve");
	SYM(addr_free, "cuMemAddressFree");
	SYM(mem_map, "cuMemMap");
	SYM(mem_unmap, "cuMemUnmap");
	SYM(alloc_async, "cuMemAllocAsync");
	SYM(alloc_from_pool, "cuMemAllocFromPoolAsync");
	SYM(free_async, "cuMemFreeAsync");
	SYM(pool_create, "cuMemPoolCreate");
	SYM(pool_destroy, "cuMemPoolDestroy");
	SYM(pool_trim, "cuMemPoolTrimTo");
	SYM(get_mem_pool, "cuDeviceGetMemPool");
	SYM(stream_sync, "cuStreamSynchronize");
	SYM(module_load, "cuModuleLoadData");
	SYM(get_function, "cuModuleGetFunction");
	SYM(launch, "cuLaunchKernel");
	SYM(ctx_sync, "cuCtxSynchronize");
	*(void **)&cu.error_name = dlsym(h, "cuGetErrorName");
}

static CUdevice dev;

static void setup(void)
{
	load();
	CUresult r;
	CUcontext ctx;
	if ((r = cu.init(0)))
		die("cuInit: %s", err_name(r));
	if ((r = cu.device_get(&dev, 0)))
		die("cuDeviceGet: %s", err_name(r));
	if ((r = cu.retain(&ctx, dev)))
		die("cuDevicePrimaryCtxRetain: %s", err_name(r));
	if ((r = cu.set_current(ctx)))
		die("cuCtxSetCurrent: %s", err_name(r));
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the claim's region, read directly (absent without the shim) ---- */

static const struct gpuslice_region_header *region(void)
{
	static const struct gpuslice_region_header *h;
	if (h)
		return h;
	const char *dir = getenv(GPUSLICE_ENV_ACCOUNTING_DIR);
	if (!dir)
		return NULL;
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, GPUSLICE_REGION_FILE);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	void *p = mmap(NULL, GPUSLICE_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	h = p;
	return h;
}

static void print_region(void)
{
	const struct gpuslice_region_header *h = region();
	if (!h) {
		printf(" region=none");
		return;
	}
	printf(" region_used=%" PRIu64 " region_limit=%" PRIu64 " region_high=%" PRIu64 " region_refused=%" PRIu64,
	       __atomic_load_n(&h->used, __ATOMIC_ACQUIRE), h->memory_limit,
	       __atomic_load_n(&h->high_water, __ATOMIC_ACQUIRE), __atomic_load_n(&h->oom_count, __ATOMIC_ACQUIRE));
}

/* ---- card, view ---- */

static int cmd_card(void)
{
	setup();
	char name[256] = "?";
	size_t total = 0;
	cu.device_name(name, sizeof name, dev);
	CUresult r = cu.total_mem(&total, dev);
	if (r)
		die("cuDeviceTotalMem_v2: %s", err_name(r));
	printf("card total=%zu name=%s\n", total, name);
	return 0;
}

static int cmd_view(void)
{
	setup();
	size_t f = 0, t = 0, dt = 0;
	CUresult r = cu.mem_get_info(&f, &t);
	printf("view api=cuMemGetInfo_v2 rc=%d total=%zu free=%zu\n", r, t, f);
	r = cu.total_mem(&dt, dev);
	printf("view api=cuDeviceTotalMem_v2 rc=%d total=%zu\n", r, dt);
	void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!nv) {
		printf("view api=nvml rc=-1 error=cannot-load-libnvidia-ml.so.1\n");
		return 0;
	}
	nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))dlsym(nv, "nvmlInit_v2");
	nvmlReturn_t (*get)(unsigned, nvmlDevice_t *) =
		(nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(nv, "nvmlDeviceGetHandleByIndex_v2");
	nvmlReturn_t (*m1)(nvmlDevice_t, nvmlMemory_t *) =
		(nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))dlsym(nv, "nvmlDeviceGetMemoryInfo");
	nvmlReturn_t (*m2)(nvmlDevice_t, nvmlMemory_v2_t *) =
		(nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_v2_t *))dlsym(nv, "nvmlDeviceGetMemoryInfo_v2");
	nvmlDevice_t d;
	if (!init || !get || init() != NVML_SUCCESS || get(0, &d) != NVML_SUCCESS) {
		printf("view api=nvml rc=-1 error=nvml-did-not-initialise\n");
		return 0;
	}
	/* CUDA_VISIBLE_DEVICES does not apply to NVML: index 0 is the card the
	 * proof runs on only when it is the machine's first, which it checks */
	if (m1) {
		nvmlMemory_t m = {0};
		int rc = m1(d, &m);
		printf("view api=nvmlDeviceGetMemoryInfo rc=%d total=%llu used=%llu\n", rc, m.total, m.used);
	}
	if (m2) {
		nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
		int rc = m2(d, &m);
		printf("view api=nvmlDeviceGetMemoryInfo_v2 rc=%d total=%llu used=%llu\n", rc, m.total, m.used);
	}
	return 0;
}

/* ---- fill ---- */

struct block {
	CUdeviceptr p;
	CUmemGenericAllocationHandle h;
};

static int cmd_fill(const char *path, uint64_t chunk_mib)
{
	setup();
	static struct block b[MAX_BLOCKS];
	uint64_t chunk = chunk_mib * MiB;
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	CUmemoryPool pool = NULL;
	if (!strcmp(path, "async")) {
		CUresult r = cu.get_mem_pool(&pool, dev);
		if (r)
			die("cuDeviceGetMemPool: %s", err_name(r));
	} else if (!strcmp(path, "pool")) {
		CUmemPoolProps props;
		memset(&props, 0, sizeof props);
		props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		props.location.id = dev;
		CUresult r = cu.pool_create(&pool, &props);
		if (r)
			die("cuMemPoolCreate: %s", err_name(r));
	} else if (strcmp(path, "linear") && strcmp(path, "managed") && strcmp(path, "vmm")) {
		die("unknown path %s: want linear, managed, vmm, async or pool", path);
	}
	int n = 0;
	CUresult r = CUDA_SUCCESS;
	while (n < MAX_BLOCKS) {
		struct block *x = &b[n];
		if (!strcmp(path, "linear")) {
			r = cu.alloc(&x->p, chunk);
		} else if (!strcmp(path, "managed")) {
			r = cu.managed(&x->p, chunk, CU_MEM_ATTACH_GLOBAL);
		} else if (!strcmp(path, "vmm")) {
			r = cu.mem_create(&x->h, chunk, &prop, 0);
			if (r == CUDA_SUCCESS) {
				CUresult r2 = cu.addr_reserve(&x->p, chunk, 0, 0, 0);
				if (r2 == CUDA_SUCCESS)
					r2 = cu.mem_map(x->p, chunk, 0, x->h, 0);
				if (r2)
					die("cuMemAddressReserve/cuMemMap: %s", err_name(r2));
			}
		} else if (!strcmp(path, "async")) {
			r = cu.alloc_async(&x->p, chunk, NULL);
		} else {
			r = cu.alloc_from_pool(&x->p, chunk, pool, NULL);
		}
		if (r)
			break;
		n++;
	}
	if (pool)
		cu.stream_sync(NULL);
	printf("fill path=%s chunk=%" PRIu64 " blocks=%d allocated=%" PRIu64 " next=%s", path, chunk, n,
	       (uint64_t)n * chunk, n == MAX_BLOCKS ? "not-tried" : err_name(r));
	print_region();
	printf("\n");
	fflush(stdout);
	for (int i = n - 1; i >= 0; i--) {
		struct block *x = &b[i];
		if (!strcmp(path, "vmm")) {
			cu.mem_unmap(x->p, chunk);
			cu.addr_free(x->p, chunk);
			cu.mem_release(x->h);
		} else if (pool) {
			cu.free_async(x->p, NULL);
		} else {
			cu.free(x->p);
		}
	}
	if (pool) {
		cu.stream_sync(NULL);
		cu.pool_trim(pool, 0);
		if (!strcmp(path, "pool"))
			cu.pool_destroy(pool);
	}
	printf("freed path=%s", path);
	print_region();
	printf("\n");
	return 0;
}

/* ---- hold, hog, interactive ---- */

static CUdeviceptr alloc_or_die(uint64_t mib)
{
	CUdeviceptr p = 0;
	CUresult r = cu.alloc(&p, mib * MiB);
	if (r) {
		printf("refused mib=%" PRIu64 " rc=%s\n", mib, err_name(r));
		exit(3);
	}
	return p;
}

static void wait_stdin(void)
{
	char line[64];
	while (fgets(line, sizeof line, stdin) && strncmp(line, "exit", 4))
		;
}

static int cmd_hold(uint64_t mib)
{
	setup();
	if (mib)
		alloc_or_die(mib);
	printf("holding pid=%d mib=%" PRIu64, (int)getpid(), mib);
	print_region();
	printf("\n");
	fflush(stdout);
	wait_stdin();
	return 0;
}

__attribute__((noreturn)) static void cmd_hog(uint64_t mib, uint64_t churn_mib)
{
	setup();
	alloc_or_die(mib);
	printf("holding pid=%d mib=%" PRIu64, (int)getpid(), mib);
	print_region();
	printf("\n");
	fflush(stdout);
	for (;;) {
		CUdeviceptr p;
		if (cu.alloc(&p, churn_mib * MiB) == CUDA_SUCCESS)
			cu.free(p);
	}
}

static int cmd_interactive(void)
{
	setup();
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		unsigned long long mib;
		if (sscanf(line, "alloc %llu", &mib) == 1) {
			CUdeviceptr p = 0;
			CUresult r = cu.alloc(&p, mib * MiB);
			printf("alloc mib=%llu rc=%s", mib, err_name(r));
			print_region();
			printf("\n");
		} else if (!strncmp(line, "exit", 4)) {
			break;
		} else {
			printf("unknown line=%s", line);
		}
		fflush(stdout);
	}
	return 0;
}

/* ---- bench, spin ---- */

static CUfunction function(const char *name)
{
	CUmodule mod;
	CUfunction f;
	CUresult r = cu.module_load(&mod, ptx);
	if (r)
		die("cuModuleLoadData: %s", err_name(r));
	if ((r = cu.get_function(&f, mod, name)))
		die("cuModuleGetFunction %s: %s", name, err_name(r));
	return f;
}

static int cmd_bench(long allocs, long launches)
{
	setup();
	CUfunction empty = function("empty");
	double best_alloc = 1e18, best_launch = 1e18;
	for (int round = 0; round < 5; round++) {
		uint64_t t0 = now_ns();
		for (long i = 0; i < allocs; i++) {
			CUdeviceptr p;
			CUresult r = cu.alloc(&p, MiB);
			if (r || (r = cu.free(p)))
				die("cuMemAlloc_v2/cuMemFree_v2: %s", err_name(r));
		}
		double a = (double)(now_ns() - t0) / (double)allocs;
		if (a < best_alloc)
			best_alloc = a;
		cu.ctx_sync();
		t0 = now_ns();
		for (long i = 0; i < launches; i++) {
			CUresult r = cu.launch(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
			if (r)
				die("cuLaunchKernel: %s", err_name(r));
		}
		cu.ctx_sync();
		double l = (double)(now_ns() - t0) / (double)launches;
		if (l < best_launch)
			best_launch = l;
	}
	printf("bench alloc_free_ns=%.1f launch_ns=%.1f\n", best_alloc, best_launch);
	return 0;
}

static long spin_for(CUfunction f, uint64_t kernel_ns, int batch, uint64_t until)
{
	long n = 0;
	void *params[] = {&kernel_ns};
	while (now_ns() < until) {
		for (int i = 0; i < batch; i++) {
			CUresult r = cu.launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
			if (r)
				die("cuLaunchKernel: %s", err_name(r));
		}
		CUresult r = cu.ctx_sync();
		if (r)
			die("cuCtxSynchronize: %s", err_name(r));
		n += batch;
	}
	return n;
}

static int cmd_spin(double seconds, uint64_t kernel_us, int batch)
{
	setup();
	CUfunction f = function("spin");
	uint64_t kernel_ns = kernel_us * 1000;
	/* the warm-up compiles the kernel, measures it for the pacer and
	 * spends the pacer's initial allowance */
	spin_for(f, kernel_ns, batch, now_ns() + 500000000ull);
	uint64_t t0 = now_ns();
	long n = spin_for(f, kernel_ns, batch, t0 + (uint64_t)(seconds * 1e9));
	uint64_t wall = now_ns() - t0;
	printf("spin kernels=%ld kernel_ns=%" PRIu64 " wall_ns=%" PRIu64 " busy=%.4f\n", n, kernel_ns, wall,
	       (double)n * (double)kernel_ns / (double)wall);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "card") && argc == 2)
		return cmd_card();
	if (!strcmp(c, "view") && argc == 2)
		return cmd_view();
	if (!strcmp(c, "fill") && argc == 4)
		return cmd_fill(argv[2], strtoull(argv[3], NULL, 10));
	if (!strcmp(c, "hold") && argc == 3)
		return cmd_hold(strtoull(argv[2], NULL, 10));
	if (!strcmp(c, "hog") && argc == 4)
		cmd_hog(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
	if (!strcmp(c, "interactive") && argc == 2)
		return cmd_interactive();
	if (!strcmp(c, "bench") && argc == 4)
		return cmd_bench(atol(argv[2]), atol(argv[3]));
	if (!strcmp(c, "spin") && argc == 5)
		return cmd_spin(atof(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]));
	die("usage: see the comment at the top of gpuproof-cuda.c");
}
