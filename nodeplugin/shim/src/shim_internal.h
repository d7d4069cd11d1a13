/* Declarations shared by the parts of libgpuslice.so. Nothing here is exported.
 *
 * Where things live:
 *   init.c          constructor, first-use attach, fork
 *   config.c        the environment and the effective limits
 *   limits.c        the read-only limits file and the plugin's observations
 *   log.c           messages on stderr
 *   region.c        the shared accounting region: slots, charging, reclaiming
 *   table.c         per-process tables of live allocations
 *   syms.c          dlsym, cuGetProcAddress and the driver's real functions
 *   alloc_linear.c  cuMemAlloc*, cuMemFree
 *   alloc_array.c   CUDA arrays and mipmapped arrays
 *   alloc_vmm.c     virtual memory management (cuMemCreate, cuMemMap...)
 *   alloc_pool.c    stream-ordered allocations and memory pools
 *   context.c       cuInit and contexts (each costs device memory)
 *   meminfo.c       what cuMemGetInfo, cuDeviceTotalMem and NVML report
 *   pace.c          the compute share: pacing kernel and graph launches
 */
#ifndef GS_SHIM_INTERNAL_H
#define GS_SHIM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "../include/gpuslice.h"
#include "cuda_abi.h"

#define GS_EXPORT __attribute__((visibility("default")))
#define GS_LIKELY(x) __builtin_expect(!!(x), 1)
#define GS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- symbols (syms.c) ----
 * X(name, base, min_cuda_version, kind)
 * name: the driver's exported name; base: the name cuGetProcAddress is asked
 * for; min_cuda_version: the CUDA version that introduced this variant (used
 * only when the driver hands back an address that is not an exported symbol);
 * kind: one of the GS_HOOK_* / GS_CALL_* combinations of GS_SYM_* below.
 */
#define GS_SYM_IN_LIBCUDA 0x01        /* lives in libcuda.so.1 (else libnvidia-ml.so.1) */
#define GS_SYM_PER_THREAD_STREAM 0x02 /* _ptsz variant: stream 0 is the per-thread default stream */
#define GS_SYM_ACCOUNTED 0x04         /* changes the accounting: never hand out an unwrapped one */
#define GS_SYM_INTERNAL 0x08          /* only called by the shim; not wrapped */

/* wrapped driver and NVML functions */
#define GS_HOOK_CUDA (GS_SYM_IN_LIBCUDA)
#define GS_HOOK_CUDA_PER_THREAD_STREAM (GS_SYM_IN_LIBCUDA | GS_SYM_PER_THREAD_STREAM)
#define GS_HOOK_CUDA_ACCOUNTED (GS_SYM_IN_LIBCUDA | GS_SYM_ACCOUNTED)
#define GS_HOOK_CUDA_ACCOUNTED_PER_THREAD_STREAM (GS_SYM_IN_LIBCUDA | GS_SYM_ACCOUNTED | GS_SYM_PER_THREAD_STREAM)
#define GS_HOOK_NVML 0
/* driver and NVML functions the shim only calls */
#define GS_CALL_CUDA (GS_SYM_IN_LIBCUDA | GS_SYM_INTERNAL)
#define GS_CALL_NVML (GS_SYM_INTERNAL)

#define GS_SYMBOLS(X)                                                                                             \
	X(cuInit, cuInit, 2000, GS_HOOK_CUDA)                                                                     \
	X(cuGetProcAddress, cuGetProcAddress, 11030, GS_HOOK_CUDA_ACCOUNTED)                                      \
	X(cuGetProcAddress_v2, cuGetProcAddress, 12000, GS_HOOK_CUDA_ACCOUNTED)                                   \
	X(cuMemGetInfo, cuMemGetInfo, 2000, GS_HOOK_CUDA)                                                         \
	X(cuMemGetInfo_v2, cuMemGetInfo, 3020, GS_HOOK_CUDA)                                                      \
	X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, GS_HOOK_CUDA)                                                 \
	X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, GS_HOOK_CUDA)                                              \
	X(cuMemAlloc, cuMemAlloc, 2000, GS_HOOK_CUDA_ACCOUNTED)                                                   \
	X(cuMemAlloc_v2, cuMemAlloc, 3020, GS_HOOK_CUDA_ACCOUNTED)                                                \
	X(cuMemAllocPitch, cuMemAllocPitch, 2000, GS_HOOK_CUDA_ACCOUNTED)                                         \
	X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, GS_HOOK_CUDA_ACCOUNTED)                                      \
	X(cuMemFree_v2, cuMemFree, 3020, GS_HOOK_CUDA_ACCOUNTED)                                                  \
	X(cuMemAllocManaged, cuMemAllocManaged, 6000, GS_HOOK_CUDA_ACCOUNTED)                                     \
	X(cuMemCreate, cuMemCreate, 10020, GS_HOOK_CUDA_ACCOUNTED)                                                \
	X(cuMemRelease, cuMemRelease, 10020, GS_HOOK_CUDA_ACCOUNTED)                                              \
	X(cuMemMap, cuMemMap, 10020, GS_HOOK_CUDA_ACCOUNTED)                                                      \
	X(cuMemUnmap, cuMemUnmap, 10020, GS_HOOK_CUDA_ACCOUNTED)                                                  \
	X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, GS_HOOK_CUDA_ACCOUNTED)                \
	X(cuMemAllocAsync, cuMemAllocAsync, 11020, GS_HOOK_CUDA_ACCOUNTED)                                        \
	X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, GS_HOOK_CUDA_ACCOUNTED_PER_THREAD_STREAM)                 \
	X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, GS_HOOK_CUDA_ACCOUNTED)                        \
	X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, GS_HOOK_CUDA_ACCOUNTED_PER_THREAD_STREAM) \
	X(cuMemFreeAsync, cuMemFreeAsync, 11020, GS_HOOK_CUDA_ACCOUNTED)                                          \
	X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, GS_HOOK_CUDA_ACCOUNTED_PER_THREAD_STREAM)                   \
	X(cuMemPoolCreate, cuMemPoolCreate, 11020, GS_HOOK_CUDA_ACCOUNTED)                                        \
	X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, GS_HOOK_CUDA_ACCOUNTED)                                      \
	X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, GS_HOOK_CUDA_ACCOUNTED)                                        \
	X(cuArrayCreate, cuArrayCreate, 2000, GS_HOOK_CUDA_ACCOUNTED)                                             \
	X(cuArrayCreate_v2, cuArrayCreate, 3020, GS_HOOK_CUDA_ACCOUNTED)                                          \
	X(cuArray3DCreate, cuArray3DCreate, 2000, GS_HOOK_CUDA_ACCOUNTED)                                         \
	X(cuArray3DCreate_v2, cuArray3DCreate, 3020, GS_HOOK_CUDA_ACCOUNTED)                                      \
	X(cuArrayDestroy, cuArrayDestroy, 2000, GS_HOOK_CUDA_ACCOUNTED)                                           \
	X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, GS_HOOK_CUDA_ACCOUNTED)                           \
	X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, GS_HOOK_CUDA_ACCOUNTED)                         \
	X(cuCtxCreate, cuCtxCreate, 2000, GS_HOOK_CUDA_ACCOUNTED)                                                 \
	X(cuCtxCreate_v2, cuCtxCreate, 3020, GS_HOOK_CUDA_ACCOUNTED)                                              \
	X(cuCtxCreate_v3, cuCtxCreate, 11040, GS_HOOK_CUDA_ACCOUNTED)                                             \
	X(cuCtxCreate_v4, cuCtxCreate, 12050, GS_HOOK_CUDA_ACCOUNTED)                                             \
	X(cuCtxDestroy, cuCtxDestroy, 2000, GS_HOOK_CUDA_ACCOUNTED)                                               \
	X(cuCtxDestroy_v2, cuCtxDestroy, 4000, GS_HOOK_CUDA_ACCOUNTED)                                            \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, GS_HOOK_CUDA_ACCOUNTED)                       \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, GS_HOOK_CUDA_ACCOUNTED)                     \
	X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, GS_HOOK_CUDA_ACCOUNTED)                 \
	X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, GS_HOOK_CUDA_ACCOUNTED)                         \
	X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, GS_HOOK_CUDA_ACCOUNTED)                     \
	X(cuGreenCtxCreate, cuGreenCtxCreate, 12040, GS_HOOK_CUDA_ACCOUNTED)                                      \
	X(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040, GS_HOOK_CUDA_ACCOUNTED)                                    \
	X(cuLaunchKernel, cuLaunchKernel, 4000, GS_HOOK_CUDA)                                                     \
	X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, GS_HOOK_CUDA_PER_THREAD_STREAM)                              \
	X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, GS_HOOK_CUDA)                                                \
	X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, GS_HOOK_CUDA_PER_THREAD_STREAM)                         \
	X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, GS_HOOK_CUDA)                               \
	X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, GS_HOOK_CUDA_PER_THREAD_STREAM)        \
	X(cuGraphLaunch, cuGraphLaunch, 10000, GS_HOOK_CUDA)                                                      \
	X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, GS_HOOK_CUDA_PER_THREAD_STREAM)                               \
	X(cuCtxSynchronize, cuCtxSynchronize, 2000, GS_HOOK_CUDA)                                                 \
	X(cuStreamSynchronize, cuStreamSynchronize, 2000, GS_HOOK_CUDA)                                           \
	X(cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, GS_HOOK_CUDA_PER_THREAD_STREAM)                    \
	X(nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo, 0, GS_HOOK_NVML)                                      \
	X(nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfo_v2, 0, GS_HOOK_NVML)

/* Driver functions the shim calls itself but does not wrap. */
#define GS_INTERNAL_SYMBOLS(X)                                                                                    \
	X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, GS_CALL_CUDA)                                                   \
	X(cuCtxGetDevice, cuCtxGetDevice, 2000, GS_CALL_CUDA)                                                     \
	X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, GS_CALL_CUDA)                                            \
	X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, GS_CALL_CUDA)                                      \
	X(cuEventCreate, cuEventCreate, 2000, GS_CALL_CUDA)                                                       \
	X(cuEventRecord, cuEventRecord, 2000, GS_CALL_CUDA)                                                       \
	X(cuEventQuery, cuEventQuery, 2000, GS_CALL_CUDA)                                                         \
	X(cuEventSynchronize, cuEventSynchronize, 2000, GS_CALL_CUDA)                                             \
	X(cuEventElapsedTime, cuEventElapsedTime, 2000, GS_CALL_CUDA)                                             \
	X(cuEventDestroy_v2, cuEventDestroy, 4000, GS_CALL_CUDA)                                                  \
	X(nvmlInit_v2, nvmlInit_v2, 0, GS_CALL_NVML)                                                              \
	X(nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByIndex_v2, 0, GS_CALL_NVML)                          \
	X(nvmlDeviceGetUtilizationRates, nvmlDeviceGetUtilizationRates, 0, GS_CALL_NVML)

enum {
#define GS_ENUM(name, base, ver, kind) GS_IDX_##name,
	GS_SYMBOLS(GS_ENUM)
	GS_INTERNAL_SYMBOLS(GS_ENUM)
#undef GS_ENUM
	GS_NSYMS
};

struct gs_sym {
	const char *name;
	const char *base;
	int min_version;
	int flags; /* GS_SYM_* */
	void *wrapper; /* NULL for internal symbols */
	void *real;    /* the driver's function, resolved lazily */
};
extern struct gs_sym gs_syms[GS_NSYMS];

void *gs_resolve(int idx);
static inline void *gs_real(int idx)
{
	void *p = __atomic_load_n(&gs_syms[idx].real, __ATOMIC_ACQUIRE);
	return GS_LIKELY(p != 0) ? p : gs_resolve(idx);
}
/* REAL(name) is the driver's name function, typed; NULL if the driver lacks it. */
#define REAL(name) ((__typeof__(&name))gs_real(GS_IDX_##name))
/* Declares var as the driver's name function; a wrapper whose driver lacks
 * it answers as that driver would. */
#define NEED_REAL(var, name)                \
	__typeof__(&name) var = REAL(name); \
	if (GS_UNLIKELY(!var))              \
	return CUDA_ERROR_NOT_FOUND

/* ---- configuration (config.c), state and lifecycle (init.c) ---- */
enum { GS_UNINIT = 0, GS_ENFORCE = 1, GS_BROKEN = 2 };

/* What the environment asks; each may only make the limits file's stricter. */
struct gs_config {
	uint64_t env_limit; /* 0: not given */
	uint32_t env_share; /* 0: not given */
	int env_burst;      /* -1: not given */
	uint32_t env_window_ms;
	uint64_t env_ctx_overhead; /* 0: not given */
	uint64_t ctx_overhead;     /* effective: the larger of the file's and the environment's */
	bool debug;
	char env_dir[4096]; /* GPUSLICE_ACCOUNTING_DIR, "" if unset */
	char dir[4096];     /* the directory in use (gs_limits_pick_dir) */
	char error[512];    /* configuration error, refuses allocations */
};

struct gs_state {
	int mode; /* GS_*; read with acquire */
	struct gs_config cfg;
	uint64_t limit;     /* effective: the stricter of the limits file and the environment */
	uint32_t share;     /* effective */
	bool burst;
	uint64_t window_ns;
	bool pacing; /* share < 100 */
	const struct gpuslice_limits *lim; /* the limits file, mapped read-only */
	int fd;
	struct gpuslice_region_header *hdr;
	/* the region's geometry as checked when this process attached: never
	 * read from the region again, which any process of the claim can write */
	uint32_t hdr_size, slot_size, slot_count;
	struct gpuslice_slot *slot;
	int slot_idx;
	size_t map_len;
	char broken[768];
};
extern struct gs_state gs;

/* Parses the environment into gs.cfg the first time; init_mu held. */
void gs_config_load(void);
/* Sets the effective limits: the stricter of the limits file's and the environment's. */
void gs_config_resolve(const struct gpuslice_limits *l);

/* ---- the limits file (limits.c) ---- */
/* Sets gs.cfg.dir: the container's directory when its limits file exists. */
void gs_limits_pick_dir(void);
/* Maps and checks the limits file in gs.cfg.dir into gs.lim; on failure
 * gs.broken says why. */
int gs_limits_open(void);
void gs_limits_after_fork(void);
/* The plugin's last observation of the claim's memory and the unix time
 * (ns) its sample began; false before the first. */
bool gs_observation(uint64_t *used, uint64_t *at_unix_ns);
/* Waits until an observation made after this call has landed; false when
 * none came within a few sample periods. */
bool gs_wait_observation(void);

int gs_init_slow(void);
/* The mode, attaching to the region on first use. */
static inline int gs_ensure(void)
{
	int m = __atomic_load_n(&gs.mode, __ATOMIC_ACQUIRE);
	return GS_LIKELY(m != GS_UNINIT) ? m : gs_init_slow();
}
/* Records why the library refuses allocations (gs.broken). */
void gs_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- messages (log.c) ---- */
void gs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the region (region.c) ---- */
/* Attaches this process to the region in gs.cfg.dir (gs.lim mapped); on
 * failure gs.broken says why and nothing is held. */
int gs_region_attach(void);
/* In the child after fork: drops the parent's mapping and locks. */
void gs_region_after_fork(void);

/* Charging: 0 on success, -1 when the budget (or a broken configuration)
 * refuses it. n may be 0. */
int gs_charge(uint64_t n);
void gs_credit(uint64_t n);
int gs_charge_context(uint64_t n);
void gs_credit_context(uint64_t n);
uint64_t gs_used(void);
uint64_t gs_limit(void);
void gs_note_live(int64_t delta); /* live allocation count of this process */
int gs_reclaim_dead(void);        /* frees dead processes' shares; returns how many */
static inline struct gpuslice_slot *gs_slot(struct gpuslice_region_header *h, uint32_t i)
{
	return (struct gpuslice_slot *)((char *)h + gs.hdr_size + (size_t)gs.slot_size * i);
}

/* ---- allocation tables (table.c) ---- */
enum { GS_K_LINEAR = 1, GS_K_POOL, GS_K_ARRAY, GS_K_MIPMAP, GS_K_VMM, GS_K_CTX };
struct gs_entry {
	uint64_t key;  /* pointer or handle; 0 marks an empty cell */
	uint64_t size; /* bytes charged */
	uint64_t aux;  /* context (linear, arrays) or pool */
	uint32_t kind;
	uint32_t refs; /* VMM: handle references */
	uint32_t maps; /* VMM: live mappings */
	uint32_t released;
};
struct gs_table;
enum { GS_T_LINEAR, GS_T_ARRAY, GS_T_VMM, GS_T_CTX, GS_NTABLES };
struct gs_table *gs_table_at(int i);
void gs_table_put(struct gs_table *t, const struct gs_entry *e);
bool gs_table_take(struct gs_table *t, uint64_t key, struct gs_entry *out);
bool gs_table_get(struct gs_table *t, uint64_t key, struct gs_entry *out);
/* Removes every entry with aux == aux and kind in kinds_mask; returns bytes. */
uint64_t gs_table_sweep(struct gs_table *t, uint64_t aux, uint32_t kinds_mask, uint64_t *count);
void gs_tables_after_fork(void);

/* ---- allocations (alloc_*.c, context.c; shared helpers in alloc.h) ---- */
void gs_vmm_after_fork(void);
void gs_pools_after_fork(void);
int gs_pools_reconcile_all(bool blocking);
void gs_contexts_after_fork(void);

/* ---- pacing (pace.c) ---- */
void gs_pace_after_fork(void);
void gs_pace_forget_context(CUcontext ctx);

/* ---- time ---- */
static inline uint64_t gs_now_ns(void) /* CLOCK_MONOTONIC */
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gs_unix_ns(void) /* CLOCK_REALTIME */
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- wrapper prototypes (the driver's signatures) ---- */
CUresult cuInit(unsigned int flags);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus);
CUresult cuMemGetInfo(unsigned int *free, unsigned int *total);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width, unsigned int height,
			 unsigned int elem);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
		     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep);
CUresult cuArrayCreate(CUarray *handle, const void *desc);
CUresult cuArrayCreate_v2(CUarray *handle, const CUDA_ARRAY_DESCRIPTOR *desc);
CUresult cuArray3DCreate(CUarray *handle, const void *desc);
CUresult cuArray3DCreate_v2(CUarray *handle, const CUDA_ARRAY3D_DESCRIPTOR *desc);
CUresult cuArrayDestroy(CUarray handle);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *handle, const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle);
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags);
CUresult cuGreenCtxDestroy(CUgreenCtx hCtx);
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params,
			void **extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params,
			     void **extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				   unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream,
				   void **params);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
					unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
					CUstream stream, void **params);
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream);
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream);
CUresult cuCtxSynchronize(void);
CUresult cuStreamSynchronize(CUstream stream);
CUresult cuStreamSynchronize_ptsz(CUstream stream);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

/* internal-only driver functions: declared so REAL() has their types */
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxGetDevice(CUdevice *dev);
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult cuEventCreate(CUevent *ev, unsigned int flags);
CUresult cuEventRecord(CUevent ev, CUstream stream);
CUresult cuEventQuery(CUevent ev);
CUresult cuEventSynchronize(CUevent ev);
CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end);
CUresult cuEventDestroy_v2(CUevent ev);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util);

#endif
