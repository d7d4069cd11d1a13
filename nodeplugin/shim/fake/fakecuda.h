/*
 * A test-only libcuda.so.1: one simulated 32 GiB Tesla V100 (see fakegpu.h).
 * It keeps the driver's contracts that the shim depends on: allocations fail
 * with CUDA_ERROR_OUT_OF_MEMORY when the device is full, contexts cost
 * memory, pools keep freed memory reserved until trimmed or synchronised,
 * virtual-memory handles are freed after their last release and unmap,
 * destroying a context frees its allocations, cuGetProcAddress hands out the
 * newest variant a CUDA version had, and kernels take GPU time.
 *
 * Test knobs (environment): FAKEGPU_STATE (shared state file),
 * FAKEGPU_CONTEXT_BYTES (default 300 MiB), FAKEGPU_POOL_GRANULE (default
 * 2 MiB), FAKEGPU_QUEUE_DEPTH (launches a process may have queued, default
 * 1024). Kernel durations: the first kernel parameter points to a uint64_t of
 * nanoseconds.
 *
 * This header holds what the parts of the library (fakecuda_*.c) share: the
 * process-local state of the simulated driver, the helpers every area uses
 * and the driver functions it exports. The state shared between processes
 * (device memory, the timeline) is in fakegpu.h.
 *
 *   fakecuda_state.c     process-local state, the allocation table, fork
 *   fakecuda_device.c    cuInit, devices, version, errors
 *   fakecuda_context.c   contexts, primary contexts, the current context
 *   fakecuda_memory.c    memory info, linear allocations, frees
 *   fakecuda_array.c     arrays and mipmapped arrays
 *   fakecuda_vmm.c       virtual memory management
 *   fakecuda_pool.c      memory pools and stream-ordered allocations
 *   fakecuda_stream.c    streams, events, the timeline, what the GPU saw
 *   fakecuda_launch.c    modules, kernel and graph launches
 *   fakecuda_procaddr.c  cuGetProcAddress
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stdbool.h>
#include <stdint.h>

#include "../src/cuda_abi.h"
#include "fakegpu.h"

#define API __attribute__((visibility("default")))
#define MiB (1024ull * 1024ull)

/* everything declared here is internal to the library unless marked API */
#pragma GCC visibility push(hidden)

/* ---- process-local state (fakecuda_state.c) ---- */

struct ctx {
	bool primary, alive;
	int refs;
	int dev;
};

struct alloc {
	uint64_t key;
	uint64_t size;   /* device bytes it holds */
	struct ctx *ctx; /* NULL: not tied to a context */
	struct pool *pool;
	int kind; /* FAKE_LINEAR, FAKE_ARRAY, FAKE_POOL */
};

struct pool {
	uint64_t reserved, used, threshold;
	bool host, destroyed;
	struct pool *next;
};

struct vmm {
	uint64_t handle, size;
	int refs, maps;
	bool device;
	struct vmm *next;
};

struct mapping {
	uint64_t va, size;
	struct vmm *h;
	struct mapping *next;
};

struct stream {
	uint64_t tail;
};

struct event {
	uint64_t ts;
	bool recorded;
};

struct function {
	char name[64];
};

struct graph {
	uint64_t duration;
};

struct fake_driver {
	pthread_mutex_t mu;
	bool inited;
	uint64_t ctx_bytes, granule;
	unsigned depth;
	struct ctx primary;
	struct alloc *tab; /* open addressing, key 0 = empty */
	size_t cap, len;
	uint64_t next_va, next_handle;
	struct pool *pools, *default_pool, *current_pool;
	struct vmm *vmms;
	struct mapping *maps;
	struct stream legacy;
	uint64_t last_end;
	/* launches */
	pthread_mutex_t launch_mu;
	uint64_t ends[4096];
	unsigned ends_head, ends_n;
	struct fake_interval busy[FAKE_RING];
	uint64_t busy_n, busy_total;
};
extern struct fake_driver F;

extern __thread struct ctx *current; /* the calling thread's current context */
extern __thread struct stream per_thread; /* its per-thread default stream */

/* kinds of struct alloc */
enum { FAKE_LINEAR = 1, FAKE_ARRAY = 2, FAKE_POOL = 3 };

static inline uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* F.mu held for the table and the address space */
void tab_put(struct alloc a);
bool tab_take(uint64_t key, struct alloc *out);
uint64_t new_va(uint64_t size);

/* The calling thread's context, if it is alive. */
static inline struct ctx *need_ctx(void)
{
	if (current && current->alive)
		return current;
	return NULL;
}

#define CHECK_INIT()                                       \
	do {                                               \
		if (!F.inited)                             \
			return CUDA_ERROR_NOT_INITIALIZED; \
	} while (0)

/* ---- used across areas ---- */
CUresult linear_alloc(CUdeviceptr *dptr, uint64_t size, uint64_t charge); /* fakecuda_memory.c */
CUresult free_any(CUdeviceptr dptr);                                     /* fakecuda_memory.c */
void pool_trim_locked(struct pool *p, uint64_t keep);                    /* fakecuda_pool.c, F.mu held */
void sync_pools(void);                                                   /* fakecuda_pool.c */
struct stream *stream_of(CUstream s, bool ptsz);                         /* fakecuda_stream.c */
uint64_t timeline_push(struct stream *st, uint64_t d);                   /* fakecuda_stream.c */

/* ---- the exported driver functions ---- */
API CUresult cuInit(unsigned int flags);
API CUresult cuDriverGetVersion(int *v);
API CUresult cuDeviceGetCount(int *n);
API CUresult cuDeviceGet(CUdevice *d, int ordinal);
API CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
API CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev);
API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
API CUresult cuGetErrorString(CUresult e, const char **s);
API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice dev);
API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev);
API CUresult cuCtxDestroy(CUcontext ctx);
API CUresult cuCtxDestroy_v2(CUcontext ctx);
API CUresult cuGreenCtxCreate(CUgreenCtx *p, CUdevResourceDesc d, CUdevice dev, unsigned int flags);
API CUresult cuGreenCtxDestroy(CUgreenCtx g);
API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
API CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
API CUresult cuDevicePrimaryCtxReset(CUdevice dev);
API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
API CUresult cuCtxSetCurrent(CUcontext ctx);
API CUresult cuCtxGetCurrent(CUcontext *pctx);
API CUresult cuCtxPushCurrent_v2(CUcontext ctx);
API CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
API CUresult cuCtxGetDevice(CUdevice *dev);
API CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
API CUresult cuMemGetInfo(unsigned int *free, unsigned int *total);
API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size);
API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int size);
API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags);
API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem);
API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int w, unsigned int h,
	unsigned int e);
API CUresult cuMemFree_v2(CUdeviceptr dptr);
API CUresult cuMemFree(CUdeviceptr_v1 dptr);
API CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d);
API CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d);
API CUresult cuArrayCreate(CUarray *h, const void *d);
API CUresult cuArray3DCreate(CUarray *h, const void *d);
API CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels);
API CUresult cuArrayDestroy(CUarray h);
API CUresult cuMipmappedArrayDestroy(CUmipmappedArray h);
API CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option);
API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
	unsigned long long flags);
API CUresult cuMemRelease(CUmemGenericAllocationHandle h);
API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
	unsigned long long flags);
API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
	unsigned long long flags);
API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr);
API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev);
API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);
API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props);
API CUresult cuMemPoolDestroy(CUmemoryPool pool);
API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);
API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s);
API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s);
API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s);
API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s);
API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
API CUresult cuStreamCreate(CUstream *s, unsigned int flags);
API CUresult cuStreamDestroy_v2(CUstream s);
API CUresult cuStreamSynchronize(CUstream s);
API CUresult cuStreamSynchronize_ptsz(CUstream s);
API CUresult cuCtxSynchronize(void);
API CUresult cuEventCreate(CUevent *ev, unsigned int flags);
API CUresult cuEventDestroy_v2(CUevent ev);
API CUresult cuEventRecord(CUevent ev, CUstream s);
API CUresult cuEventRecord_ptsz(CUevent ev, CUstream s);
API CUresult cuEventQuery(CUevent ev);
API CUresult cuEventSynchronize(CUevent ev);
API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b);
API CUresult cuModuleLoadData(CUmodule *m, const void *image);
API CUresult cuModuleUnload(CUmodule m);
API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
	unsigned bz, unsigned shmem, CUstream s, void **params, void **extra);
API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
	unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params, void **extra);
API CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra);
API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra);
API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
	unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params);
API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
	unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params);
API CUresult cuGraphCreate(CUgraph *g, unsigned int flags);
API CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
	const CUDA_KERNEL_NODE_PARAMS *p);
API CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags);
API CUresult cuGraphLaunch(CUgraphExec e, CUstream s);
API CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s);
API CUresult cuGraphExecDestroy(CUgraphExec e);
API CUresult cuGraphDestroy(CUgraph g);
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
	CUdriverProcAddressQueryResult *status);

/* ---- for the tests: what the simulated GPU saw ---- */
API uint64_t fakegpu_busy_ns(uint64_t t);
API uint64_t fakegpu_mem_used(void);
API uint64_t fakegpu_mem_high_water(void);
API uint64_t fakegpu_now_ns(void);

#pragma GCC visibility pop

#endif
