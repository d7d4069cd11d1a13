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
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/cuda_abi.h"
#include "fakegpu.h"

#define API __attribute__((visibility("default")))
#define MiB (1024ull * 1024ull)

/* ---- process-local state ---- */

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
	int kind; /* 1 linear, 2 array, 3 pool */
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

static struct {
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
} F = {.mu = PTHREAD_MUTEX_INITIALIZER, .launch_mu = PTHREAD_MUTEX_INITIALIZER};

static __thread struct ctx *current;
static __thread struct stream per_thread;

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : def;
}

static void child_reset(void)
{
	pthread_mutex_init(&F.mu, NULL);
	pthread_mutex_init(&F.launch_mu, NULL);
	F.inited = false;
	memset(&F.primary, 0, sizeof F.primary);
	if (F.tab)
		memset(F.tab, 0, F.cap * sizeof *F.tab);
	F.len = 0;
	F.pools = F.default_pool = F.current_pool = NULL;
	F.vmms = NULL;
	F.maps = NULL;
	F.legacy.tail = 0;
	F.last_end = 0;
	F.ends_n = F.ends_head = 0;
	F.busy_n = F.busy_total = 0;
	current = NULL;
	per_thread.tail = 0;
}

__attribute__((constructor)) static void fake_ctor(void)
{
	F.ctx_bytes = env_u64("FAKEGPU_CONTEXT_BYTES", 300 * MiB);
	F.granule = env_u64("FAKEGPU_POOL_GRANULE", 2 * MiB);
	F.depth = (unsigned)env_u64("FAKEGPU_QUEUE_DEPTH", 1024);
	if (F.depth < 1 || F.depth > 4096)
		F.depth = 1024;
	F.next_va = 0x7f0000000000ull;
	F.next_handle = 0x1000;
	F.primary.primary = true;
	pthread_atfork(NULL, NULL, child_reset);
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static uint64_t mixk(uint64_t k)
{
	k ^= k >> 31;
	k *= 0x9e3779b97f4a7c15ull;
	return k ^ (k >> 29);
}

/* F.mu held */
static void tab_put(struct alloc a)
{
	if ((F.len + 1) * 2 > F.cap) {
		size_t nc = F.cap ? F.cap * 2 : 1024;
		struct alloc *nt = calloc(nc, sizeof *nt), *old = F.tab;
		size_t oc = F.cap;
		F.tab = nt;
		F.cap = nc;
		F.len = 0;
		for (size_t i = 0; i < oc; i++)
			if (old[i].key)
				tab_put(old[i]);
		free(old);
	}
	size_t i = mixk(a.key) & (F.cap - 1);
	while (F.tab[i].key)
		i = (i + 1) & (F.cap - 1);
	F.tab[i] = a;
	F.len++;
}

/* F.mu held */
static bool tab_take(uint64_t key, struct alloc *out)
{
	if (!F.cap || !key)
		return false;
	size_t i = mixk(key) & (F.cap - 1);
	for (; F.tab[i].key; i = (i + 1) & (F.cap - 1)) {
		if (F.tab[i].key != key)
			continue;
		*out = F.tab[i];
		/* remove and reinsert the rest of the cluster */
		F.tab[i].key = 0;
		F.len--;
		for (size_t j = (i + 1) & (F.cap - 1); F.tab[j].key; j = (j + 1) & (F.cap - 1)) {
			struct alloc a = F.tab[j];
			F.tab[j].key = 0;
			F.len--;
			tab_put(a);
		}
		return true;
	}
	return false;
}

static uint64_t new_va(uint64_t size)
{
	uint64_t v = F.next_va;
	F.next_va += round_up(size ? size : 1, 2 * MiB) + 2 * MiB;
	return v;
}

static struct ctx *need_ctx(void)
{
	if (current && current->alive)
		return current;
	return NULL;
}

/* ---- init, device, version ---- */

API CUresult cuInit(unsigned int flags)
{
	(void)flags;
	fake_shared();
	pthread_mutex_lock(&F.mu);
	F.inited = true;
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

#define CHECK_INIT()                 \
	do {                         \
		if (!F.inited)       \
			return CUDA_ERROR_NOT_INITIALIZED; \
	} while (0)

API CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 12080;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *n)
{
	CHECK_INIT();
	*n = 1;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	CHECK_INIT();
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	strncpy(name, FAKE_NAME, (size_t)len - 1);
	name[len - 1] = 0;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !v)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case 75: *v = 7; break;  /* compute capability major */
	case 76: *v = 0; break;  /* minor */
	case 16: *v = 80; break; /* multiprocessors */
	default: *v = 0;
	}
	return CUDA_SUCCESS;
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = FAKE_TOTAL_MEM;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = 0xffffffffu;
	return CUDA_SUCCESS;
}

API CUresult cuGetErrorString(CUresult e, const char **s)
{
	switch (e) {
	case CUDA_SUCCESS: *s = "no error"; break;
	case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
	case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
	default: *s = "error";
	}
	return CUDA_SUCCESS;
}

/* ---- contexts ---- */

static CUresult ctx_new(CUcontext *pctx, int dev)
{
	CHECK_INIT();
	if (dev != 0 || !pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_mem_reserve(F.ctx_bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct ctx *c = calloc(1, sizeof *c);
	c->alive = true;
	c->dev = dev;
	*pctx = (CUcontext)c;
	current = c;
	return CUDA_SUCCESS;
}

API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_new(pctx, dev);
}
API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_new(pctx, dev);
}
API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice dev)
{
	(void)p, (void)n, (void)flags;
	return ctx_new(pctx, dev);
}
API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev)
{
	(void)p, (void)flags;
	return ctx_new(pctx, dev);
}

/* F.mu held: frees what a context's destruction frees */
static void free_ctx_allocs(struct ctx *c)
{
	for (size_t i = 0; i < F.cap;) {
		if (F.tab[i].key && F.tab[i].ctx == c && F.tab[i].kind != 3) {
			struct alloc a;
			uint64_t key = F.tab[i].key;
			tab_take(key, &a);
			fake_mem_release(a.size);
			continue; /* the cluster was rebuilt: look at i again */
		}
		i++;
	}
}

static CUresult ctx_destroy(CUcontext ctx)
{
	struct ctx *c = (struct ctx *)ctx;
	if (!c || c->primary || !c->alive)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&F.mu);
	free_ctx_allocs(c);
	pthread_mutex_unlock(&F.mu);
	c->alive = false;
	fake_mem_release(F.ctx_bytes);
	if (current == c)
		current = NULL;
	return CUDA_SUCCESS;
}

API CUresult cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }
API CUresult cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }

API CUresult cuGreenCtxCreate(CUgreenCtx *p, CUdevResourceDesc d, CUdevice dev, unsigned int flags)
{
	(void)d, (void)flags;
	CUcontext save = (CUcontext)current;
	CUresult r = ctx_new((CUcontext *)p, dev);
	current = (struct ctx *)save; /* green contexts are not made current */
	return r;
}
API CUresult cuGreenCtxDestroy(CUgreenCtx g) { return ctx_destroy((CUcontext)g); }

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&F.mu);
	if (F.primary.refs == 0) {
		if (fake_mem_reserve(F.ctx_bytes)) {
			pthread_mutex_unlock(&F.mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		F.primary.alive = true;
	}
	F.primary.refs++;
	pthread_mutex_unlock(&F.mu);
	*pctx = (CUcontext)&F.primary;
	return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&F.mu);
	if (F.primary.refs == 0) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (--F.primary.refs == 0) {
		free_ctx_allocs(&F.primary);
		F.primary.alive = false;
		fake_mem_release(F.ctx_bytes);
	}
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}
API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_release(dev); }
API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_release(dev); }

static CUresult primary_reset(CUdevice dev)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&F.mu);
	free_ctx_allocs(&F.primary);
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}
API CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return primary_reset(dev); }
API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_reset(dev); }

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	current = (struct ctx *)ctx;
	return CUDA_SUCCESS;
}
API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	*pctx = (CUcontext)current;
	return CUDA_SUCCESS;
}
API CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return cuCtxSetCurrent(ctx); }
API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	if (pctx)
		*pctx = (CUcontext)current;
	current = NULL;
	return CUDA_SUCCESS;
}
API CUresult cuCtxGetDevice(CUdevice *dev)
{
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = 0;
	return CUDA_SUCCESS;
}

/* ---- memory ---- */

API CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	uint64_t used = __atomic_load_n(&fake_shared()->mem_used, __ATOMIC_ACQUIRE);
	*free = FAKE_TOTAL_MEM - used;
	*total = FAKE_TOTAL_MEM;
	return CUDA_SUCCESS;
}

API CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	size_t f, t;
	CUresult r = cuMemGetInfo_v2(&f, &t);
	if (r == CUDA_SUCCESS) {
		*free = f > 0xffffffffull ? 0xffffffffu : (unsigned int)f;
		*total = 0xffffffffu;
	}
	return r;
}

static CUresult linear_alloc(CUdeviceptr *dptr, uint64_t size, uint64_t charge)
{
	struct ctx *c = need_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!dptr || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_mem_reserve(charge))
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&F.mu);
	uint64_t va = new_va(size);
	tab_put((struct alloc){.key = va, .size = charge, .ctx = c, .kind = 1});
	pthread_mutex_unlock(&F.mu);
	*dptr = va;
	return CUDA_SUCCESS;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { return linear_alloc(dptr, size, size); }

API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int size)
{
	(void)dptr, (void)size;
	return CUDA_ERROR_NOT_SUPPORTED; /* no 32-bit device pointers on a 64-bit driver */
}

API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	(void)flags;
	return linear_alloc(dptr, size, size);
}

API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem)
{
	if (!pitch || elem == 0 || elem > 16)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t p = round_up(width, 512);
	CUresult r = linear_alloc(dptr, p * height, p * height);
	if (r == CUDA_SUCCESS)
		*pitch = p;
	return r;
}

API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int w, unsigned int h, unsigned int e)
{
	(void)dptr, (void)pitch, (void)w, (void)h, (void)e;
	return CUDA_ERROR_NOT_SUPPORTED;
}

static void pool_trim_locked(struct pool *p, uint64_t keep);

static CUresult free_any(CUdeviceptr dptr)
{
	struct alloc a;
	pthread_mutex_lock(&F.mu);
	if (!tab_take(dptr, &a)) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a.kind == 2) {
		tab_put(a);
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a.kind == 3) {
		a.pool->used -= a.size;
		if (a.pool->destroyed && a.pool->used == 0)
			pool_trim_locked(a.pool, 0);
	} else {
		fake_mem_release(a.size);
	}
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemFree_v2(CUdeviceptr dptr) { return free_any(dptr); }
API CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	(void)dptr;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- arrays ---- */

static uint64_t elem_bytes(CUarray_format f, unsigned ch)
{
	uint64_t b;
	switch (f) {
	case 0x01: case 0x08: b = 1; break;
	case 0x02: case 0x09: case 0x10: b = 2; break;
	case 0x03: case 0x0a: case 0x20: b = 4; break;
	default: b = 4;
	}
	return b * (ch ? ch : 1);
}

#define ATLEAST1(x) ((x) ? (uint64_t)(x) : 1ull)

static CUresult array_new(void **handle, uint64_t size)
{
	struct ctx *c = need_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (size && fake_mem_reserve(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	void *h = malloc(16);
	pthread_mutex_lock(&F.mu);
	tab_put((struct alloc){.key = (uint64_t)(uintptr_t)h, .size = size, .ctx = c, .kind = 2});
	pthread_mutex_unlock(&F.mu);
	*handle = h;
	return CUDA_SUCCESS;
}

API CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d)
{
	if (!h || !d || !d->Width)
		return CUDA_ERROR_INVALID_VALUE;
	return array_new((void **)h, d->Width * ATLEAST1(d->Height) * elem_bytes(d->Format, d->NumChannels));
}

API CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	if (!h || !d || !d->Width)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t size = (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING))
				? 0
				: d->Width * ATLEAST1(d->Height) * ATLEAST1(d->Depth) * elem_bytes(d->Format, d->NumChannels);
	return array_new((void **)h, size);
}

API CUresult cuArrayCreate(CUarray *h, const void *d)
{
	(void)h, (void)d;
	return CUDA_ERROR_NOT_SUPPORTED;
}
API CUresult cuArray3DCreate(CUarray *h, const void *d)
{
	(void)h, (void)d;
	return CUDA_ERROR_NOT_SUPPORTED;
}

API CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels)
{
	if (!h || !d || !d->Width || !levels)
		return CUDA_ERROR_INVALID_VALUE;
	bool layers = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
	uint64_t size = 0;
	for (unsigned l = 0; l < levels; l++)
		size += ATLEAST1(d->Width >> l) * ATLEAST1(d->Height >> l) *
			(layers ? ATLEAST1(d->Depth) : ATLEAST1(d->Depth >> l)) * elem_bytes(d->Format, d->NumChannels);
	return array_new((void **)h, size);
}

static CUresult array_destroy(void *h)
{
	struct alloc a;
	pthread_mutex_lock(&F.mu);
	if (!tab_take((uint64_t)(uintptr_t)h, &a)) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (a.kind != 2) {
		tab_put(a);
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	pthread_mutex_unlock(&F.mu);
	if (a.size)
		fake_mem_release(a.size);
	free(h);
	return CUDA_SUCCESS;
}
API CUresult cuArrayDestroy(CUarray h) { return array_destroy(h); }
API CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) { return array_destroy(h); }

/* ---- virtual memory management ---- */

API CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option)
{
	(void)prop, (void)option;
	*g = 2 * MiB;
	return CUDA_SUCCESS;
}

API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			 unsigned long long flags)
{
	(void)flags;
	CHECK_INIT();
	if (!handle || !prop || !size || size % (2 * MiB))
		return CUDA_ERROR_INVALID_VALUE;
	bool device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
	if (device && fake_mem_reserve(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct vmm *v = calloc(1, sizeof *v);
	pthread_mutex_lock(&F.mu);
	v->handle = F.next_handle++;
	v->size = size;
	v->refs = 1;
	v->device = device;
	v->next = F.vmms;
	F.vmms = v;
	pthread_mutex_unlock(&F.mu);
	*handle = v->handle;
	return CUDA_SUCCESS;
}

static struct vmm *vmm_find(uint64_t h)
{
	for (struct vmm *v = F.vmms; v; v = v->next)
		if (v->handle == h)
			return v;
	return NULL;
}

/* F.mu held */
static void vmm_maybe_free(struct vmm *v)
{
	if (v->refs || v->maps)
		return;
	for (struct vmm **pp = &F.vmms; *pp; pp = &(*pp)->next)
		if (*pp == v) {
			*pp = v->next;
			break;
		}
	if (v->device)
		fake_mem_release(v->size);
	free(v);
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	pthread_mutex_lock(&F.mu);
	struct vmm *v = vmm_find(h);
	if (!v || v->refs == 0) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	v->refs--;
	vmm_maybe_free(v);
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
				 unsigned long long flags)
{
	(void)align, (void)addr, (void)flags;
	pthread_mutex_lock(&F.mu);
	*ptr = new_va(size);
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	(void)ptr, (void)size;
	return CUDA_SUCCESS;
}

API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags)
{
	(void)offset, (void)flags;
	pthread_mutex_lock(&F.mu);
	struct vmm *v = vmm_find(h);
	if (!v || v->refs == 0) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	struct mapping *m = calloc(1, sizeof *m);
	*m = (struct mapping){ptr, size, v, F.maps};
	F.maps = m;
	v->maps++;
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	pthread_mutex_lock(&F.mu);
	for (struct mapping **pp = &F.maps; *pp;) {
		struct mapping *m = *pp;
		if (m->va >= ptr && m->va < ptr + size) {
			*pp = m->next;
			m->h->maps--;
			vmm_maybe_free(m->h);
			free(m);
			continue;
		}
		pp = &m->next;
	}
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;
	pthread_mutex_lock(&F.mu);
	for (struct mapping *m = F.maps; m; m = m->next)
		if (a >= m->va && a < m->va + m->size) {
			m->h->refs++;
			*h = m->h->handle;
			pthread_mutex_unlock(&F.mu);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&F.mu);
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- pools ---- */

/* F.mu held */
static void pool_trim_locked(struct pool *p, uint64_t keep)
{
	uint64_t floor = round_up(p->used, F.granule);
	uint64_t target = keep > floor ? keep : floor;
	if (p->reserved > target) {
		if (!p->host)
			fake_mem_release(p->reserved - target);
		p->reserved = target;
	}
}

/* F.mu held */
static struct pool *pool_new(bool host)
{
	struct pool *p = calloc(1, sizeof *p);
	p->host = host;
	p->next = F.pools;
	F.pools = p;
	return p;
}

/* F.mu held */
static struct pool *default_pool(void)
{
	if (!F.default_pool)
		F.default_pool = F.current_pool = pool_new(false);
	return F.current_pool;
}

API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&F.mu);
	default_pool();
	*pool = (CUmemoryPool)F.default_pool;
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&F.mu);
	*pool = (CUmemoryPool)default_pool();
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&F.mu);
	default_pool();
	F.current_pool = (struct pool *)pool;
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	if (!pool || !props)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&F.mu);
	*pool = (CUmemoryPool)pool_new(props->location.type != CU_MEM_LOCATION_TYPE_DEVICE);
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	struct pool *p = (struct pool *)pool;
	if (!p || p == F.default_pool)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&F.mu);
	p->destroyed = true;
	if (p->used == 0)
		pool_trim_locked(p, 0);
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
	pthread_mutex_lock(&F.mu);
	pool_trim_locked((struct pool *)pool, keep);
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct pool *p = (struct pool *)pool;
	if (!p || !value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&F.mu);
	cuuint64_t v;
	switch (attr) {
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
	default: pthread_mutex_unlock(&F.mu); return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&F.mu);
	*(cuuint64_t *)value = v;
	return CUDA_SUCCESS;
}

API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct pool *p = (struct pool *)pool;
	if (!p || attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD || !value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&F.mu);
	p->threshold = *(cuuint64_t *)value;
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, struct pool *p)
{
	struct ctx *c = need_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!dptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&F.mu);
	if (!p)
		p = default_pool();
	if (p->destroyed) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	uint64_t cached = p->reserved - (p->used < p->reserved ? p->used : p->reserved);
	if (cached < size) {
		uint64_t grow = round_up(size - cached, F.granule);
		if (!p->host && fake_mem_reserve(grow)) {
			pthread_mutex_unlock(&F.mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		p->reserved += grow;
	}
	p->used += size;
	uint64_t va = new_va(size);
	tab_put((struct alloc){.key = va, .size = size, .ctx = c, .pool = p, .kind = 3});
	pthread_mutex_unlock(&F.mu);
	*dptr = va;
	return CUDA_SUCCESS;
}

API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
	(void)s;
	return pool_alloc(dptr, size, NULL);
}
API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
	(void)s;
	return pool_alloc(dptr, size, NULL);
}
API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s)
{
	(void)s;
	return pool ? pool_alloc(dptr, size, (struct pool *)pool) : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s)
{
	(void)s;
	return pool ? pool_alloc(dptr, size, (struct pool *)pool) : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
	(void)s;
	return free_any(dptr);
}
API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
	(void)s;
	return free_any(dptr);
}

/* pools release down to their threshold when the device synchronises */
static void sync_pools(void)
{
	pthread_mutex_lock(&F.mu);
	for (struct pool *p = F.pools; p; p = p->next)
		if (p->reserved > p->threshold)
			pool_trim_locked(p, p->threshold);
	pthread_mutex_unlock(&F.mu);
}

/* ---- streams, events, the timeline ---- */

static struct stream *stream_of(CUstream s, bool ptsz)
{
	if (s == CU_STREAM_PER_THREAD || (ptsz && !s))
		return &per_thread;
	if (!s || s == CU_STREAM_LEGACY)
		return &F.legacy;
	return (struct stream *)s;
}

API CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	(void)flags;
	*s = (CUstream)calloc(1, sizeof(struct stream));
	return CUDA_SUCCESS;
}

API CUresult cuStreamDestroy_v2(CUstream s)
{
	free(s);
	return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream s, bool ptsz)
{
	fake_sleep_until(stream_of(s, ptsz)->tail);
	sync_pools();
	return CUDA_SUCCESS;
}
API CUresult cuStreamSynchronize(CUstream s) { return stream_sync(s, false); }
API CUresult cuStreamSynchronize_ptsz(CUstream s) { return stream_sync(s, true); }

API CUresult cuCtxSynchronize(void)
{
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	fake_sleep_until(__atomic_load_n(&F.last_end, __ATOMIC_ACQUIRE));
	sync_pools();
	return CUDA_SUCCESS;
}

/* Puts work of duration d on the timeline; returns when it ends. */
static uint64_t timeline_push(struct stream *st, uint64_t d)
{
	pthread_mutex_lock(&F.launch_mu);
	/* a full launch queue blocks the launching thread, as on hardware */
	for (;;) {
		uint64_t now = fake_now();
		while (F.ends_n && F.ends[F.ends_head] <= now) {
			F.ends_head = (F.ends_head + 1) % 4096;
			F.ends_n--;
		}
		if (F.ends_n < F.depth)
			break;
		fake_sleep_until(F.ends[F.ends_head]);
	}
	struct fake_shared *s = fake_shared();
	fake_lock(s);
	uint64_t now = fake_now();
	uint64_t start = s->gpu_free_at > now ? s->gpu_free_at : now;
	uint64_t end = start + d;
	s->gpu_free_at = end;
	if (d) {
		s->ring[s->ring_n % FAKE_RING] = (struct fake_interval){start, end};
		s->ring_n++;
	}
	fake_unlock(s);
	st->tail = end;
	if (end > F.last_end)
		__atomic_store_n(&F.last_end, end, __ATOMIC_RELEASE);
	if (d) {
		F.ends[(F.ends_head + F.ends_n) % 4096] = end;
		F.ends_n++;
		F.busy[F.busy_n % FAKE_RING] = (struct fake_interval){start, end};
		F.busy_n++;
		F.busy_total += d;
	}
	pthread_mutex_unlock(&F.launch_mu);
	return end;
}

API CUresult cuEventCreate(CUevent *ev, unsigned int flags)
{
	(void)flags;
	*ev = (CUevent)calloc(1, sizeof(struct event));
	return CUDA_SUCCESS;
}

API CUresult cuEventDestroy_v2(CUevent ev)
{
	free(ev);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent ev, CUstream s, bool ptsz)
{
	struct event *e = (struct event *)ev;
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	struct fake_shared *sh = fake_shared();
	struct stream *st = stream_of(s, ptsz);
	fake_lock(sh);
	uint64_t now = fake_now();
	uint64_t ts = sh->gpu_free_at > now ? sh->gpu_free_at : now;
	fake_unlock(sh);
	e->ts = ts;
	e->recorded = true;
	st->tail = ts;
	return CUDA_SUCCESS;
}
API CUresult cuEventRecord(CUevent ev, CUstream s) { return event_record(ev, s, false); }
API CUresult cuEventRecord_ptsz(CUevent ev, CUstream s) { return event_record(ev, s, true); }

API CUresult cuEventQuery(CUevent ev)
{
	struct event *e = (struct event *)ev;
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	return !e->recorded || e->ts <= fake_now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

API CUresult cuEventSynchronize(CUevent ev)
{
	struct event *e = (struct event *)ev;
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (e->recorded)
		fake_sleep_until(e->ts);
	sync_pools();
	return CUDA_SUCCESS;
}

API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	struct event *x = (struct event *)a, *y = (struct event *)b;
	if (!x || !y || !x->recorded || !y->recorded)
		return CUDA_ERROR_INVALID_HANDLE;
	uint64_t now = fake_now();
	if (x->ts > now || y->ts > now)
		return CUDA_ERROR_NOT_READY;
	*ms = (float)((double)((int64_t)y->ts - (int64_t)x->ts) / 1e6);
	return CUDA_SUCCESS;
}

/* ---- modules and launches ---- */

API CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
	(void)image;
	*m = (CUmodule)calloc(1, 8);
	return CUDA_SUCCESS;
}

API CUresult cuModuleUnload(CUmodule m)
{
	free(m);
	return CUDA_SUCCESS;
}

API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	if (!m || !name)
		return CUDA_ERROR_INVALID_VALUE;
	struct function *fn = calloc(1, sizeof *fn);
	strncpy(fn->name, name, sizeof fn->name - 1);
	*f = (CUfunction)fn;
	return CUDA_SUCCESS;
}

static uint64_t duration_of(void **params) { return params && params[0] ? *(uint64_t *)params[0] : 0; }

static CUresult launch(CUfunction f, CUstream s, bool ptsz, void **params)
{
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	timeline_push(stream_of(s, ptsz), duration_of(params));
	return CUDA_SUCCESS;
}

API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			    unsigned shmem, CUstream s, void **params, void **extra)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)extra;
	return launch(f, s, false, params);
}
API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				 unsigned bz, unsigned shmem, CUstream s, void **params, void **extra)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)extra;
	return launch(f, s, true, params);
}
API CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	(void)extra;
	return c ? launch(f, c->hStream, false, params) : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	(void)extra;
	return c ? launch(f, c->hStream, true, params) : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				       unsigned bz, unsigned shmem, CUstream s, void **params)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
	return launch(f, s, false, params);
}
API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
					    unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
	return launch(f, s, true, params);
}

API CUresult cuGraphCreate(CUgraph *g, unsigned int flags)
{
	(void)flags;
	*g = (CUgraph)calloc(1, sizeof(struct graph));
	return CUDA_SUCCESS;
}

API CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
				  const CUDA_KERNEL_NODE_PARAMS *p)
{
	(void)deps, (void)ndeps;
	if (!g || !p)
		return CUDA_ERROR_INVALID_VALUE;
	((struct graph *)g)->duration += duration_of(p->kernelParams);
	*node = (CUgraphNode)g;
	return CUDA_SUCCESS;
}

API CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
	(void)flags;
	struct graph *x = calloc(1, sizeof *x);
	*x = *(struct graph *)g;
	*e = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec e, CUstream s, bool ptsz)
{
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	timeline_push(stream_of(s, ptsz), ((struct graph *)e)->duration);
	return CUDA_SUCCESS;
}
API CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { return graph_launch(e, s, false); }
API CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) { return graph_launch(e, s, true); }
API CUresult cuGraphExecDestroy(CUgraphExec e)
{
	free(e);
	return CUDA_SUCCESS;
}
API CUresult cuGraphDestroy(CUgraph g)
{
	free(g);
	return CUDA_SUCCESS;
}

/* ---- for the tests: what the simulated GPU saw ---- */

/* GPU time this process's kernels have run by monotonic time t. */
API uint64_t fakegpu_busy_ns(uint64_t t)
{
	pthread_mutex_lock(&F.launch_mu);
	uint64_t busy = F.busy_total;
	uint64_t n = F.busy_n < FAKE_RING ? F.busy_n : FAKE_RING;
	for (uint64_t i = 0; i < n; i++) {
		struct fake_interval *iv = &F.busy[(F.busy_n - 1 - i) % FAKE_RING];
		if (iv->end <= t)
			break;
		busy -= iv->end - (iv->start > t ? iv->start : t);
	}
	pthread_mutex_unlock(&F.launch_mu);
	return busy;
}

API uint64_t fakegpu_mem_used(void) { return __atomic_load_n(&fake_shared()->mem_used, __ATOMIC_ACQUIRE); }
API uint64_t fakegpu_mem_high_water(void) { return __atomic_load_n(&fake_shared()->mem_high, __ATOMIC_ACQUIRE); }
API uint64_t fakegpu_now_ns(void) { return fake_now(); }

/* ---- cuGetProcAddress: the newest variant the requested version had ---- */

struct proc {
	const char *base;
	void *fn;
	int version;
	bool ptsz;
};

#define P(b, f, v) {#b, (void *)&f, v, false}
#define PT(b, f, v) {#b, (void *)&f, v, true}
API CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
API CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static const struct proc procs[] = {
	P(cuInit, cuInit, 2000), P(cuDriverGetVersion, cuDriverGetVersion, 2020),
	P(cuDeviceGet, cuDeviceGet, 2000), P(cuDeviceGetCount, cuDeviceGetCount, 2000),
	P(cuDeviceGetName, cuDeviceGetName, 2000), P(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000),
	P(cuDeviceTotalMem, cuDeviceTotalMem, 2000), P(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020),
	P(cuGetErrorString, cuGetErrorString, 6000),
	P(cuCtxCreate, cuCtxCreate, 2000), P(cuCtxCreate, cuCtxCreate_v2, 3020),
	P(cuCtxCreate, cuCtxCreate_v3, 11040), P(cuCtxCreate, cuCtxCreate_v4, 12050),
	P(cuCtxDestroy, cuCtxDestroy, 2000), P(cuCtxDestroy, cuCtxDestroy_v2, 4000),
	P(cuCtxGetCurrent, cuCtxGetCurrent, 4000), P(cuCtxSetCurrent, cuCtxSetCurrent, 4000),
	P(cuCtxGetDevice, cuCtxGetDevice, 2000), P(cuCtxSynchronize, cuCtxSynchronize, 2000),
	P(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000), P(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000),
	P(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000),
	P(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000),
	P(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000),
	P(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000),
	P(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000),
	P(cuGreenCtxCreate, cuGreenCtxCreate, 12040), P(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040),
	P(cuMemGetInfo, cuMemGetInfo, 2000), P(cuMemGetInfo, cuMemGetInfo_v2, 3020),
	P(cuMemAlloc, cuMemAlloc, 2000), P(cuMemAlloc, cuMemAlloc_v2, 3020),
	P(cuMemAllocPitch, cuMemAllocPitch, 2000), P(cuMemAllocPitch, cuMemAllocPitch_v2, 3020),
	P(cuMemFree, cuMemFree, 2000), P(cuMemFree, cuMemFree_v2, 3020),
	P(cuMemAllocManaged, cuMemAllocManaged, 6000),
	P(cuMemCreate, cuMemCreate, 10020), P(cuMemRelease, cuMemRelease, 10020),
	P(cuMemAddressReserve, cuMemAddressReserve, 10020), P(cuMemAddressFree, cuMemAddressFree, 10020),
	P(cuMemMap, cuMemMap, 10020), P(cuMemUnmap, cuMemUnmap, 10020),
	P(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000),
	P(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020),
	P(cuMemAllocAsync, cuMemAllocAsync, 11020), PT(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020),
	P(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020),
	PT(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020),
	P(cuMemFreeAsync, cuMemFreeAsync, 11020), PT(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020),
	P(cuMemPoolCreate, cuMemPoolCreate, 11020), P(cuMemPoolDestroy, cuMemPoolDestroy, 11020),
	P(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020), P(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020),
	P(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020), P(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020),
	P(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020),
	P(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020),
	P(cuArrayCreate, cuArrayCreate, 2000), P(cuArrayCreate, cuArrayCreate_v2, 3020),
	P(cuArray3DCreate, cuArray3DCreate, 2000), P(cuArray3DCreate, cuArray3DCreate_v2, 3020),
	P(cuArrayDestroy, cuArrayDestroy, 2000), P(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000),
	P(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000),
	P(cuModuleLoadData, cuModuleLoadData, 2000), P(cuModuleGetFunction, cuModuleGetFunction, 2000),
	P(cuModuleUnload, cuModuleUnload, 2000),
	P(cuLaunchKernel, cuLaunchKernel, 4000), PT(cuLaunchKernel, cuLaunchKernel_ptsz, 7000),
	P(cuLaunchKernelEx, cuLaunchKernelEx, 11060), PT(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060),
	P(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000),
	PT(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000),
	P(cuGraphCreate, cuGraphCreate, 10000), P(cuGraphAddKernelNode, cuGraphAddKernelNode, 10000),
	P(cuGraphInstantiate, cuGraphInstantiateWithFlags, 11040), P(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040),
	P(cuGraphLaunch, cuGraphLaunch, 10000), PT(cuGraphLaunch, cuGraphLaunch_ptsz, 10000),
	P(cuGraphExecDestroy, cuGraphExecDestroy, 10000), P(cuGraphDestroy, cuGraphDestroy, 10000),
	P(cuStreamCreate, cuStreamCreate, 2000), P(cuStreamDestroy, cuStreamDestroy_v2, 4000),
	P(cuStreamSynchronize, cuStreamSynchronize, 2000), PT(cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000),
	P(cuEventCreate, cuEventCreate, 2000), P(cuEventRecord, cuEventRecord, 2000),
	PT(cuEventRecord, cuEventRecord_ptsz, 7000), P(cuEventQuery, cuEventQuery, 2000),
	P(cuEventSynchronize, cuEventSynchronize, 2000), P(cuEventElapsedTime, cuEventElapsedTime, 2000),
	P(cuEventDestroy, cuEventDestroy_v2, 4000),
	P(cuGetProcAddress, cuGetProcAddress, 11030), P(cuGetProcAddress, cuGetProcAddress_v2, 12000),
};

/* With FAKEGPU_PROC_UNEXPORTED=1, cuGetProcAddress("cuMemAlloc") returns
 * this function, which is not an exported symbol: what a driver that hands
 * out internal entry points (or a variant newer than the shim) looks like. */
static CUresult internal_mem_alloc(CUdeviceptr *dptr, size_t size) { return linear_alloc(dptr, size, size); }

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	const char *unexported = getenv("FAKEGPU_PROC_UNEXPORTED");
	if (unexported && !strcmp(unexported, "1") && !strcmp(symbol, "cuMemAlloc") && version >= 3020) {
		*pfn = (void *)internal_mem_alloc;
		if (status)
			*status = CU_GET_PROC_ADDRESS_SUCCESS;
		return CUDA_SUCCESS;
	}
	bool want_ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	const struct proc *best = NULL;
	bool known = false;
	for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) {
		const struct proc *p = &procs[i];
		if (strcmp(p->base, symbol))
			continue;
		known = true;
		if (p->version > version || (p->ptsz && !want_ptsz))
			continue;
		/* prefer the per-thread variant when asked, then the newest */
		if (!best || (p->ptsz && !best->ptsz) ||
		    (p->ptsz == best->ptsz && p->version > best->version))
			best = p;
	}
	*pfn = best ? best->fn : NULL;
	if (status)
		*status = best ? CU_GET_PROC_ADDRESS_SUCCESS
			       : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return get_proc(symbol, pfn, version, flags, NULL);
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				 CUdriverProcAddressQueryResult *status)
{
	return get_proc(symbol, pfn, version, flags, status);
}
