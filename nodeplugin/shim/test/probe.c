/*
 * gs_probe / gs_linked: the C side of the shim's tests, driven by go test.
 * gs_probe finds the driver with dlopen (as the CUDA runtime does); gs_linked
 * is the same program linked against libcuda (-DGS_LINKED).
 *
 *   info                       what the driver and NVML report
 *   paths MODE                 every allocation path, found through MODE:
 *                              link | dlsym | proc (cuGetProcAddress_v2, 12.8)
 *                              | proc11 (cuGetProcAddress, 11.8) | ptsz | fork
 *   interactive                commands on stdin: alloc N | free P | used | exit
 *   forkcheck                  a forked worker shares the budget; its share is
 *                              reclaimed when it dies
 *   stress THREADS OPS SEED    random allocations and frees
 *   tenant KIND US EPOCH W0 W1 END   a compute tenant; prints its GPU share
 *   bench ITERS                ns per cuMemAlloc_v2+cuMemFree_v2 and per launch
 *   getproc SYMBOL VERSION     what cuGetProcAddress_v2 answers (and, for
 *                              cuMemAlloc, whether the whole slice is refused)
 *   fakestat                   the simulated device's memory counters
 *
 * Checks print "PASS name" or "FAIL name: why"; the exit status is 1 if any
 * failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../include/gpuslice.h"
#include "../src/cuda_abi.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

#ifdef GS_LINKED
CUresult cuInit(unsigned int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *, void *);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemPoolCreate(CUmemoryPool *, const CUmemPoolProps *);
CUresult cuMemPoolDestroy(CUmemoryPool);
CUresult cuMemPoolTrimTo(CUmemoryPool, size_t);
CUresult cuMemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute, void *);
CUresult cuDeviceGetMemPool(CUmemoryPool *, CUdevice);
CUresult cuStreamSynchronize(CUstream);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuGreenCtxCreate(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
CUresult cuGreenCtxDestroy(CUgreenCtx);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
			void **, void **);
CUresult cuCtxSynchronize(void);
#endif

/* ---- the driver, however it is found ---- */

struct api {
	CUresult (*init)(unsigned int);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*release)(CUdevice);
	CUresult (*set_current)(CUcontext);
	int ctx_create_version; /* 2, 3 or 4: which signature ctx_create has */
	void *ctx_create;
	CUresult (*ctx_destroy)(CUcontext);
	CUresult (*mem_get_info)(size_t *, size_t *);
	CUresult (*total_mem)(size_t *, CUdevice);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
	CUresult (*free)(CUdeviceptr);
	CUresult (*managed)(CUdeviceptr *, size_t, unsigned int);
	CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*mem_release)(CUmemGenericAllocationHandle);
	CUresult (*addr_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*mem_unmap)(CUdeviceptr, size_t);
	CUresult (*retain_handle)(CUmemGenericAllocationHandle *, void *);
	CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
	CUresult (*alloc_from_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
	CUresult (*free_async)(CUdeviceptr, CUstream);
	CUresult (*pool_create)(CUmemoryPool *, const CUmemPoolProps *);
	CUresult (*pool_destroy)(CUmemoryPool);
	CUresult (*pool_trim)(CUmemoryPool, size_t);
	CUresult (*pool_set_attr)(CUmemoryPool, CUmemPool_attribute, void *);
	CUresult (*get_mem_pool)(CUmemoryPool *, CUdevice);
	CUresult (*stream_sync)(CUstream);
	CUresult (*array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
	CUresult (*array3d_create)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
	CUresult (*array_destroy)(CUarray);
	CUresult (*mipmap_create)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
	CUresult (*mipmap_destroy)(CUmipmappedArray);
	CUresult (*green_create)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
	CUresult (*green_destroy)(CUgreenCtx);
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*get_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
			   void **, void **);
	CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
	CUresult (*launch_coop)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				CUstream, void **);
	CUresult (*graph_create)(CUgraph *, unsigned int);
	CUresult (*graph_add_kernel)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
				     const CUDA_KERNEL_NODE_PARAMS *);
	CUresult (*graph_instantiate)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*graph_launch)(CUgraphExec, CUstream);
	CUresult (*ctx_sync)(void);
	/* the simulated GPU's own view; NULL on a real driver */
	uint64_t (*fake_mem_used)(void);
	uint64_t (*fake_high)(void);
	uint64_t (*fake_busy)(uint64_t);
};

static struct api A;
static void *driver;
static int failures;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "gs_probe: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static void check(int ok, const char *name, const char *fmt, ...)
{
	if (ok) {
		printf("PASS %s\n", name);
	} else {
		va_list ap;
		va_start(ap, fmt);
		printf("FAIL %s: ", name);
		vprintf(fmt, ap);
		printf("\n");
		va_end(ap);
		failures++;
	}
	fflush(stdout);
}

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
static gpa2_fn gpa2;
static gpa1_fn gpa1;
static int gpa_version;
static cuuint64_t gpa_flags;

static void *proc(const char *base)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st = -1;
	CUresult r = gpa2 ? gpa2(base, &p, gpa_version, gpa_flags, &st) : gpa1(base, &p, gpa_version, gpa_flags);
	if (r != CUDA_SUCCESS)
		return NULL;
	return p;
}

static void *sym(const char *name)
{
	return dlsym(driver, name);
}

#define LOAD(field, dlname, base) A.field = (__typeof__(A.field))(gpa_version ? proc(base) : sym(dlname))

static void load_api(const char *mode)
{
	memset(&A, 0, sizeof A);
#ifdef GS_LINKED
	if (!strcmp(mode, "link")) {
		A.init = cuInit;
		A.retain = cuDevicePrimaryCtxRetain;
		A.release = cuDevicePrimaryCtxRelease_v2;
		A.set_current = cuCtxSetCurrent;
		A.ctx_create_version = 2;
		A.ctx_create = (void *)cuCtxCreate_v2;
		A.ctx_destroy = cuCtxDestroy_v2;
		A.mem_get_info = cuMemGetInfo_v2;
		A.total_mem = cuDeviceTotalMem_v2;
		A.alloc = cuMemAlloc_v2;
		A.pitch = cuMemAllocPitch_v2;
		A.free = cuMemFree_v2;
		A.managed = cuMemAllocManaged;
		A.mem_create = cuMemCreate;
		A.mem_release = cuMemRelease;
		A.addr_reserve = cuMemAddressReserve;
		A.mem_map = cuMemMap;
		A.mem_unmap = cuMemUnmap;
		A.retain_handle = cuMemRetainAllocationHandle;
		A.alloc_async = cuMemAllocAsync;
		A.alloc_from_pool = cuMemAllocFromPoolAsync;
		A.free_async = cuMemFreeAsync;
		A.pool_create = cuMemPoolCreate;
		A.pool_destroy = cuMemPoolDestroy;
		A.pool_trim = cuMemPoolTrimTo;
		A.pool_set_attr = cuMemPoolSetAttribute;
		A.get_mem_pool = cuDeviceGetMemPool;
		A.stream_sync = cuStreamSynchronize;
		A.array_create = cuArrayCreate_v2;
		A.array3d_create = cuArray3DCreate_v2;
		A.array_destroy = cuArrayDestroy;
		A.mipmap_create = cuMipmappedArrayCreate;
		A.mipmap_destroy = cuMipmappedArrayDestroy;
		A.green_create = cuGreenCtxCreate;
		A.green_destroy = cuGreenCtxDestroy;
		A.module_load = cuModuleLoadData;
		A.get_function = cuModuleGetFunction;
		A.launch = cuLaunchKernel;
		A.ctx_sync = cuCtxSynchronize;
		driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		goto fake;
	}
#endif
	driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!driver)
		die("dlopen libcuda.so.1: %s", dlerror());
	gpa_version = 0;
	gpa_flags = 0;
	if (!strcmp(mode, "proc") || !strcmp(mode, "ptsz")) {
		gpa2 = (gpa2_fn)dlsym(driver, "cuGetProcAddress_v2");
		gpa_version = 12080;
		gpa_flags = !strcmp(mode, "ptsz") ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
		if (!gpa2)
			die("no cuGetProcAddress_v2");
	} else if (!strcmp(mode, "proc11")) {
		gpa1 = (gpa1_fn)dlsym(driver, "cuGetProcAddress");
		gpa_version = 11080;
		if (!gpa1)
			die("no cuGetProcAddress");
	} else if (strcmp(mode, "dlsym") && strcmp(mode, "fork")) {
		die("unknown mode %s", mode);
	}
	LOAD(init, "cuInit", "cuInit");
	LOAD(retain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain");
	LOAD(release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
	LOAD(set_current, "cuCtxSetCurrent", "cuCtxSetCurrent");
	LOAD(ctx_create, "cuCtxCreate_v2", "cuCtxCreate");
	A.ctx_create_version = gpa_version >= 12050 ? 4 : gpa_version >= 11040 ? 3 : 2;
	LOAD(ctx_destroy, "cuCtxDestroy_v2", "cuCtxDestroy");
	LOAD(mem_get_info, "cuMemGetInfo_v2", "cuMemGetInfo");
	LOAD(total_mem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem");
	LOAD(alloc, "cuMemAlloc_v2", "cuMemAlloc");
	LOAD(pitch, "cuMemAllocPitch_v2", "cuMemAllocPitch");
	LOAD(free, "cuMemFree_v2", "cuMemFree");
	LOAD(managed, "cuMemAllocManaged", "cuMemAllocManaged");
	LOAD(mem_create, "cuMemCreate", "cuMemCreate");
	LOAD(mem_release, "cuMemRelease", "cuMemRelease");
	LOAD(addr_reserve, "cuMemAddressReserve", "cuMemAddressReserve");
	LOAD(mem_map, "cuMemMap", "cuMemMap");
	LOAD(mem_unmap, "cuMemUnmap", "cuMemUnmap");
	LOAD(retain_handle, "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle");
	LOAD(alloc_async, "cuMemAllocAsync", "cuMemAllocAsync");
	LOAD(alloc_from_pool, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync");
	LOAD(free_async, "cuMemFreeAsync", "cuMemFreeAsync");
	LOAD(pool_create, "cuMemPoolCreate", "cuMemPoolCreate");
	LOAD(pool_destroy, "cuMemPoolDestroy", "cuMemPoolDestroy");
	LOAD(pool_trim, "cuMemPoolTrimTo", "cuMemPoolTrimTo");
	LOAD(pool_set_attr, "cuMemPoolSetAttribute", "cuMemPoolSetAttribute");
	LOAD(get_mem_pool, "cuDeviceGetMemPool", "cuDeviceGetMemPool");
	LOAD(stream_sync, "cuStreamSynchronize", "cuStreamSynchronize");
	LOAD(array_create, "cuArrayCreate_v2", "cuArrayCreate");
	LOAD(array3d_create, "cuArray3DCreate_v2", "cuArray3DCreate");
	LOAD(array_destroy, "cuArrayDestroy", "cuArrayDestroy");
	LOAD(mipmap_create, "cuMipmappedArrayCreate", "cuMipmappedArrayCreate");
	LOAD(mipmap_destroy, "cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy");
	LOAD(green_create, "cuGreenCtxCreate", "cuGreenCtxCreate");
	LOAD(green_destroy, "cuGreenCtxDestroy", "cuGreenCtxDestroy");
	LOAD(module_load, "cuModuleLoadData", "cuModuleLoadData");
	LOAD(get_function, "cuModuleGetFunction", "cuModuleGetFunction");
	LOAD(launch, "cuLaunchKernel", "cuLaunchKernel");
	LOAD(launch_ex, "cuLaunchKernelEx", "cuLaunchKernelEx");
	LOAD(launch_coop, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel");
	LOAD(graph_create, "cuGraphCreate", "cuGraphCreate");
	LOAD(graph_add_kernel, "cuGraphAddKernelNode", "cuGraphAddKernelNode");
	LOAD(graph_instantiate, "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags");
	LOAD(graph_launch, "cuGraphLaunch", "cuGraphLaunch");
	LOAD(ctx_sync, "cuCtxSynchronize", "cuCtxSynchronize");
#ifdef GS_LINKED
fake:
#endif
	if (driver) {
		A.fake_mem_used = (uint64_t(*)(void))dlsym(driver, "fakegpu_mem_used");
		A.fake_high = (uint64_t(*)(void))dlsym(driver, "fakegpu_mem_high_water");
		A.fake_busy = (uint64_t(*)(uint64_t))dlsym(driver, "fakegpu_busy_ns");
	}
}

static CUresult ctx_create(CUcontext *c)
{
	switch (A.ctx_create_version) {
	case 4: return ((CUresult(*)(CUcontext *, void *, unsigned, CUdevice))A.ctx_create)(c, NULL, 0, 0);
	case 3: return ((CUresult(*)(CUcontext *, void *, int, unsigned, CUdevice))A.ctx_create)(c, NULL, 0, 0, 0);
	default: return ((CUresult(*)(CUcontext *, unsigned, CUdevice))A.ctx_create)(c, 0, 0);
	}
}

/* ---- the region, read directly ---- */

static struct gpuslice_region_header *region;

static struct gpuslice_region_header *map_region(void)
{
	if (region)
		return region;
	const char *dir = getenv(GPUSLICE_ENV_ACCOUNTING_DIR);
	if (!dir)
		return NULL;
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, GPUSLICE_REGION_FILE);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	void *p = mmap(NULL, GPUSLICE_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	region = p;
	return region;
}

static uint64_t used(void)
{
	struct gpuslice_region_header *h = map_region();
	return h ? __atomic_load_n(&h->used, __ATOMIC_ACQUIRE) : 0;
}

static uint64_t fake_used(void) { return A.fake_mem_used ? A.fake_mem_used() : 0; }

static CUcontext setup(void)
{
	CUresult r = A.init(0);
	if (r != CUDA_SUCCESS)
		die("cuInit: %d", r);
	CUcontext ctx;
	if ((r = A.retain(&ctx, 0)) != CUDA_SUCCESS)
		die("cuDevicePrimaryCtxRetain: %d", r);
	A.set_current(ctx);
	return ctx;
}

/* ---- info ---- */

typedef nvmlReturn_t (*nvml_mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*nvml_mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);

static int cmd_info(void)
{
	load_api("dlsym");
	setup();
	size_t f = 0, t = 0, dt = 0;
	CUresult r1 = A.mem_get_info(&f, &t), r2 = A.total_mem(&dt, 0);
	printf("cuMemGetInfo_v2 rc=%d free=%zu total=%zu\n", r1, f, t);
	printf("cuDeviceTotalMem_v2 rc=%d total=%zu\n", r2, dt);
	void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (nv) {
		nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))dlsym(nv, "nvmlInit_v2");
		nvmlReturn_t (*get)(unsigned, nvmlDevice_t *) =
			(nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(nv, "nvmlDeviceGetHandleByIndex_v2");
		nvml_mem_fn m1 = (nvml_mem_fn)dlsym(nv, "nvmlDeviceGetMemoryInfo");
		nvml_mem2_fn m2 = (nvml_mem2_fn)dlsym(nv, "nvmlDeviceGetMemoryInfo_v2");
		nvmlDevice_t d;
		if (init && get && init() == NVML_SUCCESS && get(0, &d) == NVML_SUCCESS) {
			nvmlMemory_t m = {0};
			nvmlMemory_v2_t mm = {.version = nvmlMemory_v2};
			int a = m1 ? m1(d, &m) : -1, b = m2 ? m2(d, &mm) : -1;
			printf("nvmlDeviceGetMemoryInfo rc=%d total=%llu used=%llu free=%llu\n", a, m.total, m.used, m.free);
			printf("nvmlDeviceGetMemoryInfo_v2 rc=%d total=%llu reserved=%llu used=%llu free=%llu\n", b, mm.total,
			       mm.reserved, mm.used, mm.free);
		}
	}
	printf("region used=%" PRIu64 "\n", used());
	return 0;
}

/* ---- paths ---- */

static uint64_t limit_bytes(void)
{
	const char *v = getenv(GPUSLICE_ENV_MEMORY_LIMIT);
	return v ? strtoull(v, NULL, 10) : 8 * GiB;
}

/* over: a request larger than what is left of the slice */
#define EXPECT_DELTA(name, want)                                                                                   \
	check(used() - base == (want), name, "charged %" PRIu64 ", want %" PRIu64, used() - base, (uint64_t)(want))

static void expect_refused(const char *name, CUresult r, uint64_t base, uint64_t fbase)
{
	check(r == CUDA_ERROR_OUT_OF_MEMORY && used() == base && fake_used() == fbase, name,
	      "rc=%d (want %d), charged %" PRId64 ", device grew %" PRId64, r, CUDA_ERROR_OUT_OF_MEMORY,
	      (int64_t)(used() - base), (int64_t)(fake_used() - fbase));
}

static void paths_linear(uint64_t over)
{
	uint64_t base = used(), fbase = fake_used();
	CUdeviceptr p = 0;
	CUresult r = A.alloc(&p, 256 * MiB);
	check(r == CUDA_SUCCESS, "alloc.ok", "rc=%d", r);
	EXPECT_DELTA("alloc.charged", 256 * MiB);
	r = A.free(p);
	EXPECT_DELTA("alloc.credited", 0);
	r = A.free(p);
	check(r != CUDA_SUCCESS && used() == base, "alloc.double-free-credited-once", "rc=%d used %" PRId64, r,
	      (int64_t)(used() - base));
	expect_refused("alloc.over-limit", A.alloc(&p, over), base, fbase);

	size_t pitch = 0;
	r = A.pitch(&p, &pitch, 1000, 1024, 4);
	check(r == CUDA_SUCCESS && pitch >= 1000, "pitch.ok", "rc=%d pitch=%zu", r, pitch);
	EXPECT_DELTA("pitch.charged", (uint64_t)pitch * 1024);
	A.free(p);
	EXPECT_DELTA("pitch.credited", 0);
	expect_refused("pitch.over-limit", A.pitch(&p, &pitch, over / 1024 + 1, 1024, 4), base, fbase);

	r = A.managed(&p, 128 * MiB, CU_MEM_ATTACH_GLOBAL);
	check(r == CUDA_SUCCESS, "managed.ok", "rc=%d", r);
	EXPECT_DELTA("managed.charged", 128 * MiB);
	A.free(p);
	EXPECT_DELTA("managed.credited", 0);
	expect_refused("managed.over-limit", A.managed(&p, over, CU_MEM_ATTACH_GLOBAL), base, fbase);
}

static void paths_vmm(uint64_t over)
{
	uint64_t base = used(), fbase = fake_used();
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof prop);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CUresult r = A.mem_create(&h, 64 * MiB, &prop, 0);
	check(r == CUDA_SUCCESS, "vmm.create", "rc=%d", r);
	EXPECT_DELTA("vmm.charged", 64 * MiB);
	CUdeviceptr va = 0;
	A.addr_reserve(&va, 64 * MiB, 0, 0, 0);
	r = A.mem_map(va, 64 * MiB, 0, h, 0);
	check(r == CUDA_SUCCESS, "vmm.map", "rc=%d", r);
	A.mem_release(h);
	EXPECT_DELTA("vmm.released-but-mapped-still-charged", 64 * MiB);
	r = A.retain_handle(&h2, (void *)(uintptr_t)va);
	check(r == CUDA_SUCCESS && h2 == h, "vmm.retain", "rc=%d", r);
	A.mem_unmap(va, 64 * MiB);
	EXPECT_DELTA("vmm.unmapped-but-retained-still-charged", 64 * MiB);
	A.mem_release(h2);
	EXPECT_DELTA("vmm.credited", 0);
	check(A.mem_release(h2) != CUDA_SUCCESS && used() == base, "vmm.double-release-credited-once", "");
	expect_refused("vmm.over-limit", A.mem_create(&h, (over + 2 * MiB - 1) / (2 * MiB) * (2 * MiB), &prop, 0),
		       base, fbase);
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
	r = A.mem_create(&h, 64 * MiB, &prop, 0);
	EXPECT_DELTA("vmm.host-memory-not-charged", 0);
	A.mem_release(h);
}

static void paths_async(uint64_t over)
{
	uint64_t base = used(), fbase = fake_used();
	CUmemoryPool pool = NULL;
	CUresult r = A.get_mem_pool(&pool, 0);
	check(r == CUDA_SUCCESS && pool, "async.pool", "rc=%d", r);
	cuuint64_t keep = UINT64_MAX;
	A.pool_set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
	CUdeviceptr p = 0, q = 0;
	r = A.alloc_async(&p, 99 * MiB, NULL);
	check(r == CUDA_SUCCESS, "async.ok", "rc=%d", r);
	EXPECT_DELTA("async.charged-pool-reservation", 100 * MiB);
	A.free_async(p, NULL);
	A.stream_sync(NULL);
	EXPECT_DELTA("async.freed-but-pool-keeps-it", 100 * MiB);
	r = A.alloc_async(&q, 50 * MiB, NULL);
	EXPECT_DELTA("async.reuse-not-charged-twice", 100 * MiB);
	A.free_async(q, NULL);
	A.pool_trim(pool, 0);
	EXPECT_DELTA("async.trim-credited", 0);
	cuuint64_t zero = 0;
	A.pool_set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero);
	A.alloc_async(&p, 20 * MiB, NULL);
	A.free_async(p, NULL);
	A.stream_sync(NULL);
	EXPECT_DELTA("async.released-at-sync-credited", 0);
	check(A.free_async(p, NULL) != CUDA_SUCCESS && used() == base, "async.double-free-credited-once", "");
	expect_refused("async.over-limit", A.alloc_async(&p, over, NULL), base, fbase);

	CUmemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CUmemoryPool mine = NULL;
	r = A.pool_create(&mine, &props);
	check(r == CUDA_SUCCESS, "pool.create", "rc=%d", r);
	r = A.alloc_from_pool(&p, 30 * MiB, mine, NULL);
	check(r == CUDA_SUCCESS, "pool.ok", "rc=%d", r);
	EXPECT_DELTA("pool.charged", 30 * MiB);
	expect_refused("pool.over-limit", A.alloc_from_pool(&q, over, mine, NULL), used(), fake_used());
	A.free_async(p, NULL);
	A.pool_destroy(mine);
	EXPECT_DELTA("pool.destroy-credited", 0);
	props.location.type = CU_MEM_LOCATION_TYPE_HOST;
	A.pool_create(&mine, &props);
	r = A.alloc_from_pool(&p, 30 * MiB, mine, NULL);
	EXPECT_DELTA("pool.host-pool-not-charged", 0);
	A.free_async(p, NULL);
	A.pool_destroy(mine);
}

static void paths_arrays(uint64_t over)
{
	uint64_t base = used(), fbase = fake_used();
	CUDA_ARRAY_DESCRIPTOR d = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
	CUarray a = NULL;
	CUresult r = A.array_create(&a, &d);
	check(r == CUDA_SUCCESS, "array.ok", "rc=%d", r);
	EXPECT_DELTA("array.charged", 16 * MiB);
	A.array_destroy(a);
	EXPECT_DELTA("array.credited", 0);
	check(A.array_destroy(a) != CUDA_SUCCESS && used() == base, "array.double-destroy-credited-once", "");
	d.Width = over / (1024 * 16) + 1;
	expect_refused("array.over-limit", A.array_create(&a, &d), base, fbase);

	CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 256, .Height = 256, .Depth = 64, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
				      .NumChannels = 1};
	r = A.array3d_create(&a, &d3);
	check(r == CUDA_SUCCESS, "array3d.ok", "rc=%d", r);
	EXPECT_DELTA("array3d.charged", 4 * MiB);
	A.array_destroy(a);
	EXPECT_DELTA("array3d.credited", 0);
	d3.Flags = CUDA_ARRAY3D_SPARSE;
	A.array3d_create(&a, &d3);
	EXPECT_DELTA("array3d.sparse-not-charged", 0);
	A.array_destroy(a);
	d3.Flags = 0;
	d3.Depth = over / (256 * 256) + 1;
	expect_refused("array3d.over-limit", A.array3d_create(&a, &d3), base, fbase);

	CUDA_ARRAY3D_DESCRIPTOR dm = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
	CUmipmappedArray m = NULL;
	r = A.mipmap_create(&m, &dm, 3);
	check(r == CUDA_SUCCESS, "mipmap.ok", "rc=%d", r);
	EXPECT_DELTA("mipmap.charged", 4 * MiB + 1 * MiB + 256 * 1024);
	A.mipmap_destroy(m);
	EXPECT_DELTA("mipmap.credited", 0);
	dm.Width = over / (1024 * 4) + 1;
	expect_refused("mipmap.over-limit", A.mipmap_create(&m, &dm, 1), base, fbase);
}

static void paths_contexts(CUcontext primary, uint64_t overhead, uint64_t over)
{
	uint64_t base = used(), fbase = fake_used();
	CUcontext c = NULL;
	CUresult r = ctx_create(&c);
	check(r == CUDA_SUCCESS, "ctx.create", "rc=%d", r);
	EXPECT_DELTA("ctx.overhead-charged", overhead);
	CUdeviceptr p;
	A.set_current(c);
	A.alloc(&p, 64 * MiB);
	EXPECT_DELTA("ctx.alloc-in-context", overhead + 64 * MiB);
	r = A.ctx_destroy(c);
	A.set_current(primary);
	EXPECT_DELTA("ctx.destroy-credits-overhead-and-its-allocations", 0);
	check(fake_used() == fbase, "ctx.device-agrees", "device %" PRId64, (int64_t)(fake_used() - fbase));
	if (A.green_create) {
		CUgreenCtx g = NULL;
		r = A.green_create(&g, NULL, 0, 0);
		check(r == CUDA_SUCCESS, "green.create", "rc=%d", r);
		EXPECT_DELTA("green.overhead-charged", overhead);
		A.green_destroy(g);
		EXPECT_DELTA("green.credited", 0);
	}
	CUcontext again;
	A.retain(&again, 0);
	EXPECT_DELTA("primary.second-retain-not-charged", 0);
	A.release(0);
	EXPECT_DELTA("primary.first-release-keeps-it", 0);
	(void)over;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : def;
}

static int run_paths(const char *mode)
{
	load_api(mode);
	CUcontext primary = setup();
	uint64_t overhead = env_u64(GPUSLICE_ENV_CONTEXT_OVERHEAD, GPUSLICE_DEFAULT_CONTEXT_OVERHEAD);
	uint64_t base = used();
	check(base == overhead, "primary.overhead-charged", "used %" PRIu64 ", want %" PRIu64, base, overhead);
	size_t f = 0, t = 0;
	A.mem_get_info(&f, &t);
	check(t == limit_bytes() && f == limit_bytes() - overhead, "meminfo.slice", "free=%zu total=%zu", f, t);
	uint64_t over = limit_bytes() - used() + 1;
	paths_linear(over);
	paths_vmm(over);
	paths_async(over);
	paths_arrays(over);
	paths_contexts(primary, overhead, over);
	A.release(0);
	check(used() == 0, "primary.release-credits-overhead", "used %" PRIu64, used());
	return failures ? 1 : 0;
}

static int cmd_paths(const char *mode)
{
	if (strcmp(mode, "fork"))
		return run_paths(mode);
	/* the parent uses the shim first, so the child inherits an attached library */
	load_api("dlsym");
	setup();
	CUdeviceptr p;
	CUresult r = A.alloc(&p, 1 * GiB);
	check(r == CUDA_SUCCESS, "fork.parent-alloc", "rc=%d", r);
	uint64_t parent = used();
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		/* a worker: its own context and allocations, the same budget */
		load_api("dlsym");
		setup();
		uint64_t overhead = env_u64(GPUSLICE_ENV_CONTEXT_OVERHEAD, GPUSLICE_DEFAULT_CONTEXT_OVERHEAD);
		check(used() == parent + overhead, "fork.child-context-charged", "used %" PRIu64, used());
		uint64_t over = limit_bytes() - used() + 1;
		uint64_t b = used();
		expect_refused("fork.child-over-limit", A.alloc(&p, over), b, fake_used());
		paths_linear(over);
		paths_async(over);
		fflush(stdout);
		_exit(failures ? 1 : 0); /* without releasing: a crashed worker */
	}
	int st;
	waitpid(pid, &st, 0);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork.child", "status %d", st);
	/* the child's context is still charged until its slot is reclaimed */
	uint64_t rest = limit_bytes() - parent;
	r = A.alloc(&p, rest);
	check(r == CUDA_SUCCESS && used() == limit_bytes(), "fork.child-share-reclaimed", "rc=%d used %" PRIu64, r,
	      used());
	return failures ? 1 : 0;
}

/* ---- interactive ---- */

static int cmd_interactive(void)
{
	load_api("dlsym");
	setup();
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		unsigned long long n;
		if (sscanf(line, "alloc %llu", &n) == 1) {
			CUdeviceptr p = 0;
			CUresult r = A.alloc(&p, n);
			if (r == CUDA_SUCCESS)
				printf("ok %llu\n", (unsigned long long)p);
			else
				printf("err %d\n", r);
		} else if (sscanf(line, "free %llu", &n) == 1) {
			printf("rc %d\n", A.free((CUdeviceptr)n));
		} else if (!strncmp(line, "used", 4)) {
			size_t f = 0, t = 0;
			A.mem_get_info(&f, &t);
			printf("used %" PRIu64 " free %zu total %zu\n", used(), f, t);
		} else if (!strncmp(line, "exit", 4)) {
			break;
		} else {
			printf("unknown\n");
		}
		fflush(stdout);
	}
	return 0;
}

/* ---- forkcheck: the worker's share is the claim's, and is reclaimed ---- */

static int cmd_forkcheck(void)
{
	load_api("dlsym");
	setup();
	CUdeviceptr p;
	check(A.alloc(&p, 5 * GiB) == CUDA_SUCCESS, "parent.alloc-5GiB", "");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		load_api("dlsym");
		setup();
		CUresult r = A.alloc(&p, 5 * GiB);
		check(r == CUDA_ERROR_OUT_OF_MEMORY, "child.alloc-5GiB-refused", "rc=%d", r);
		r = A.alloc(&p, 1 * GiB);
		check(r == CUDA_SUCCESS, "child.alloc-1GiB", "rc=%d", r);
		fflush(stdout);
		_exit(failures);
	}
	int st;
	waitpid(pid, &st, 0);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child.exit", "status %d", st);
	CUresult r = A.alloc(&p, 2 * GiB);
	check(r == CUDA_SUCCESS, "parent.alloc-2GiB-after-child-died", "rc=%d used %" PRIu64, r, used());
	return failures ? 1 : 0;
}

/* ---- stress ---- */

struct item {
	int kind;
	CUdeviceptr p;
	uint64_t size;
};

struct worker {
	pthread_t t;
	CUcontext ctx;
	unsigned seed;
	int ops;
	long ok, oom, err, frees;
	uint64_t worst;
};

static uint64_t stress_limit;
static volatile int over_limit_seen;

static uint64_t rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	uint64_t a = *s >> 8;
	*s = *s * 1103515245u + 12345u;
	return (a << 24) ^ (*s >> 8);
}

static CUresult stress_alloc(int kind, struct item *it, uint64_t size)
{
	CUmemAllocationProp prop;
	size_t pitch;
	CUresult r;
	it->kind = kind;
	it->size = size;
	switch (kind) {
	case 0: return A.alloc(&it->p, size);
	case 1: return A.managed(&it->p, size, CU_MEM_ATTACH_GLOBAL);
	case 2: return A.pitch(&it->p, &pitch, size / 1024, 1024, 4);
	case 3: return A.alloc_async(&it->p, size, NULL);
	default:
		memset(&prop, 0, sizeof prop);
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		it->size = (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
		CUmemGenericAllocationHandle h;
		r = A.mem_create(&h, it->size, &prop, 0);
		if (r != CUDA_SUCCESS)
			return r;
		A.addr_reserve(&it->p, it->size, 0, 0, 0);
		A.mem_map(it->p, it->size, 0, h, 0);
		A.mem_release(h); /* the mapping keeps it alive */
		return CUDA_SUCCESS;
	}
}

static void stress_free(struct item *it)
{
	switch (it->kind) {
	case 3: A.free_async(it->p, NULL); break;
	case 4: A.mem_unmap(it->p, it->size); break;
	default: A.free(it->p);
	}
}

static void *stress_thread(void *arg)
{
	struct worker *w = arg;
	A.set_current(w->ctx);
	struct item live[6];
	int n = 0;
	for (int op = 0; op < w->ops; op++) {
		uint64_t r = rnd(&w->seed);
		if (n == 0 || (n < 6 && r % 100 < 55)) {
			/* log-uniform from 1 MiB to 1 GiB */
			uint64_t size = MiB << (rnd(&w->seed) % 11);
			size += rnd(&w->seed) % size;
			struct item it;
			CUresult rc = stress_alloc((int)(rnd(&w->seed) % 5), &it, size);
			if (rc == CUDA_SUCCESS) {
				live[n++] = it;
				w->ok++;
			} else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
				w->oom++;
			} else {
				w->err++;
			}
		} else {
			int i = (int)(rnd(&w->seed) % (uint64_t)n);
			stress_free(&live[i]);
			live[i] = live[--n];
			w->frees++;
		}
		uint64_t u = used();
		if (u > w->worst)
			w->worst = u;
		if (u > stress_limit)
			over_limit_seen = 1;
	}
	while (n)
		stress_free(&live[--n]);
	return NULL;
}

static int cmd_stress(int threads, int ops, unsigned seed)
{
	load_api("dlsym");
	CUcontext ctx = setup();
	stress_limit = limit_bytes();
	used(); /* map the region before the threads read it */
	/* every process holds its context before any starts allocating */
	printf("ready\n");
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		line[0] = 0;
	struct worker *w = calloc((size_t)threads, sizeof *w);
	for (int i = 0; i < threads; i++) {
		w[i].ctx = ctx;
		w[i].seed = seed * 7919u + (unsigned)i * 104729u + 1;
		w[i].ops = ops / threads + (i < ops % threads);
		pthread_create(&w[i].t, NULL, stress_thread, &w[i]);
	}
	long ok = 0, oom = 0, err = 0, frees = 0;
	uint64_t worst = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].t, NULL);
		ok += w[i].ok;
		oom += w[i].oom;
		err += w[i].err;
		frees += w[i].frees;
		if (w[i].worst > worst)
			worst = w[i].worst;
	}
	A.stream_sync(NULL); /* pools give back what they kept */
	A.release(0);
	printf("stress ok=%ld oom=%ld err=%ld frees=%ld worst=%" PRIu64 " over=%d\n", ok, oom, err, frees, worst,
	       over_limit_seen);
	return err || over_limit_seen ? 1 : 0;
}

/* ---- compute tenant ---- */

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until_unix(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

struct sampler {
	uint64_t epoch, w0, w1;
	double share;
};

static void *sample(void *arg)
{
	struct sampler *s = arg;
	sleep_until_unix(s->epoch + s->w0);
	uint64_t t0 = mono(), b0 = A.fake_busy(t0);
	sleep_until_unix(s->epoch + s->w1);
	uint64_t t1 = mono(), b1 = A.fake_busy(t1);
	s->share = (double)(b1 - b0) / (double)(t1 - t0);
	return NULL;
}

static int cmd_tenant(const char *kind, uint64_t us, uint64_t epoch, uint64_t w0_ms, uint64_t w1_ms, uint64_t end_ms)
{
	load_api(!strcmp(kind, "ptsz") ? "ptsz" : "proc");
	setup();
	if (!A.fake_busy)
		die("tenant needs the simulated GPU");
	CUmodule mod;
	CUfunction f;
	A.module_load(&mod, "gs_sleep");
	A.get_function(&f, mod, "gs_sleep");
	uint64_t dur = us * 1000;
	void *params[] = {&dur};
	CUgraphExec exec = NULL;
	if (!strcmp(kind, "graph")) {
		CUgraph g;
		CUgraphNode node;
		A.graph_create(&g, 0);
		/* two kernels of half the duration */
		uint64_t half = dur / 2;
		void *hp[] = {&half};
		CUDA_KERNEL_NODE_PARAMS np = {.func = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
					      .blockDimY = 1, .blockDimZ = 1, .kernelParams = hp};
		A.graph_add_kernel(&node, g, NULL, 0, &np);
		A.graph_add_kernel(&node, g, &node, 1, &np);
		A.graph_instantiate(&exec, g, 0);
	}
	CUlaunchConfig cfg = {.gridDimX = 80, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1,
			      .blockDimZ = 1};
	struct sampler s = {.epoch = epoch, .w0 = w0_ms * 1000000ull, .w1 = w1_ms * 1000000ull};
	pthread_t th;
	sleep_until_unix(epoch);
	pthread_create(&th, NULL, sample, &s);
	struct timespec now;
	long launches = 0;
	CUresult r = CUDA_SUCCESS;
	for (;;) {
		clock_gettime(CLOCK_REALTIME, &now);
		if ((uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec >= epoch + end_ms * 1000000ull)
			break;
		if (!strcmp(kind, "ex"))
			r = A.launch_ex(&cfg, f, params, NULL);
		else if (!strcmp(kind, "coop"))
			r = A.launch_coop(f, 80, 1, 1, 256, 1, 1, 0, NULL, params);
		else if (!strcmp(kind, "graph"))
			r = A.graph_launch(exec, NULL);
		else
			r = A.launch(f, 80, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
		if (r != CUDA_SUCCESS)
			die("launch: %d", r);
		launches++;
	}
	pthread_join(th, NULL);
	printf("share %.4f launches %ld\n", s.share, launches);
	return 0;
}

/* ---- bench ---- */

static double per_op(uint64_t t0, uint64_t t1, long n) { return (double)(t1 - t0) / (double)n; }

static int cmd_bench(long iters)
{
#ifdef GS_LINKED
	load_api("link");
#else
	load_api("dlsym");
#endif
	setup();
	double best_alloc = 1e18, best_launch = 1e18;
	CUmodule mod;
	CUfunction f;
	A.module_load(&mod, "gs_sleep");
	A.get_function(&f, mod, "gs_sleep");
	uint64_t zero = 0;
	void *params[] = {&zero};
	for (int round = 0; round < 5; round++) {
		uint64_t t0 = mono();
		for (long i = 0; i < iters; i++) {
			CUdeviceptr p;
			if (A.alloc(&p, MiB) != CUDA_SUCCESS || A.free(p) != CUDA_SUCCESS)
				die("alloc/free failed");
		}
		uint64_t t1 = mono();
		double a = per_op(t0, t1, iters);
		if (a < best_alloc)
			best_alloc = a;
		t0 = mono();
		for (long i = 0; i < iters; i++)
			if (A.launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS)
				die("launch failed");
		t1 = mono();
		double l = per_op(t0, t1, iters);
		if (l < best_launch)
			best_launch = l;
	}
	printf("alloc_free_ns %.1f\nlaunch_ns %.1f\n", best_alloc, best_launch);
	return 0;
}

/* getproc SYMBOL VERSION: what cuGetProcAddress_v2 answers */
static int cmd_getproc(const char *symbol, int version)
{
	load_api("dlsym");
	setup();
	gpa2_fn g = (gpa2_fn)dlsym(driver, "cuGetProcAddress_v2");
	void *p = NULL;
	CUdriverProcAddressQueryResult st = -1;
	CUresult r = g(symbol, &p, version, 0, &st);
	printf("getproc rc=%d status=%d found=%d\n", r, st, p != NULL);
	if (r == CUDA_SUCCESS && p && !strcmp(symbol, "cuMemAlloc")) {
		/* use it: past the slice it must be refused */
		CUdeviceptr d;
		CUresult a = ((CUresult(*)(CUdeviceptr *, size_t))p)(&d, limit_bytes());
		printf("alloc-whole-slice rc=%d\n", a);
	}
	return 0;
}

static int cmd_fakestat(void)
{
	load_api("dlsym");
	if (!A.fake_mem_used)
		die("not the simulated GPU");
	printf("fake used=%" PRIu64 " high=%" PRIu64 "\n", A.fake_mem_used(), A.fake_high());
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		die("usage: see the comment at the top of probe.c");
	const char *c = argv[1];
	if (!strcmp(c, "info"))
		return cmd_info();
	if (!strcmp(c, "paths") && argc == 3)
		return cmd_paths(argv[2]);
	if (!strcmp(c, "interactive"))
		return cmd_interactive();
	if (!strcmp(c, "forkcheck"))
		return cmd_forkcheck();
	if (!strcmp(c, "stress") && argc == 5)
		return cmd_stress(atoi(argv[2]), atoi(argv[3]), (unsigned)atoi(argv[4]));
	if (!strcmp(c, "tenant") && argc == 8)
		return cmd_tenant(argv[2], strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
				  strtoull(argv[5], NULL, 10), strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10));
	if (!strcmp(c, "bench") && argc == 3)
		return cmd_bench(atol(argv[2]));
	if (!strcmp(c, "getproc") && argc == 4)
		return cmd_getproc(argv[2], atoi(argv[3]));
	if (!strcmp(c, "fakestat"))
		return cmd_fakestat();
	die("unknown command %s", c);
}
