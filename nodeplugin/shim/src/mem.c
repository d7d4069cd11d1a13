/*
 * Device memory: every allocation path is charged against the claim's budget
 * before the driver is asked, and credited back when the driver fails or the
 * memory is freed; what the driver and NVML report is the slice.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "shim_internal.h"

#define MiB (1024ull * 1024ull)
#define POOL_GRANULE (2 * MiB) /* the driver grows pools in 2 MiB pages */
#define PITCH_ALIGN 512ull
#define ARRAY_ROUND (64 * 1024ull)

#define NEED_REAL(var, name)                  \
	__typeof__(&name) var = REAL(name);   \
	if (GS_UNLIKELY(!var))                \
	return CUDA_ERROR_NOT_FOUND

#define T_LINEAR gs_table_at(GS_T_LINEAR)
#define T_ARRAY gs_table_at(GS_T_ARRAY)
#define T_VMM gs_table_at(GS_T_VMM)
#define T_CTX gs_table_at(GS_T_CTX)

static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	uint64_t r;
	if (__builtin_add_overflow(v, a - 1, &r))
		return UINT64_MAX;
	return r / a * a;
}

static inline uint64_t current_ctx(void)
{
	CUcontext c = NULL;
	__typeof__(&cuCtxGetCurrent) f = REAL(cuCtxGetCurrent);
	if (f)
		f(&c);
	return (uint64_t)(uintptr_t)c;
}

static void record(struct gs_table *t, uint64_t key, uint64_t size, uint64_t aux, uint32_t kind)
{
	struct gs_entry e = {.key = key, .size = size, .aux = aux, .kind = kind};
	gs_table_put(t, &e);
	gs_note_live(1);
}

/* ---- linear allocations ---- */

GS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	NEED_REAL(real, cuMemAlloc_v2);
	int m = gs_ensure();
	if (m == GS_OFF)
		return real(dptr, bytesize);
	if (gs_charge(bytesize))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(dptr, bytesize);
	if (r != CUDA_SUCCESS) {
		gs_credit(bytesize);
		return r;
	}
	record(T_LINEAR, *dptr, bytesize, current_ctx(), GS_K_LINEAR);
	return r;
}

GS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	NEED_REAL(real, cuMemAllocManaged);
	if (gs_ensure() == GS_OFF)
		return real(dptr, bytesize, flags);
	/* managed memory may migrate to the host, but it can all be resident on
	 * the device at once, so it is charged in full */
	if (gs_charge(bytesize))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(dptr, bytesize, flags);
	if (r != CUDA_SUCCESS) {
		gs_credit(bytesize);
		return r;
	}
	record(T_LINEAR, *dptr, bytesize, current_ctx(), GS_K_LINEAR);
	return r;
}

GS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
				      unsigned int elem)
{
	NEED_REAL(real, cuMemAllocPitch_v2);
	if (gs_ensure() == GS_OFF)
		return real(dptr, pitch, width, height, elem);
	uint64_t est;
	if (__builtin_mul_overflow(round_up(width, PITCH_ALIGN), (uint64_t)height, &est))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (gs_charge(est))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(dptr, pitch, width, height, elem);
	if (r != CUDA_SUCCESS) {
		gs_credit(est);
		return r;
	}
	uint64_t actual = (uint64_t)*pitch * height;
	if (actual > est && gs_charge(actual - est)) {
		/* the driver padded more than expected and the rest does not fit */
		__typeof__(&cuMemFree_v2) f = REAL(cuMemFree_v2);
		if (f)
			f(*dptr);
		gs_credit(est);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (actual < est)
		gs_credit(est - actual);
	record(T_LINEAR, *dptr, actual, current_ctx(), GS_K_LINEAR);
	return r;
}

static void pool_after_free(const struct gs_entry *e);

GS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	NEED_REAL(real, cuMemFree_v2);
	if (gs_ensure() != GS_ENFORCE)
		return real(dptr);
	/* forget before freeing: once freed, the driver may hand the same
	 * address to another thread, whose entry must not be taken here */
	struct gs_entry e;
	bool had = gs_table_take(T_LINEAR, dptr, &e);
	CUresult r = real(dptr);
	if (!had)
		return r;
	if (r != CUDA_SUCCESS) {
		gs_table_put(T_LINEAR, &e);
		return r;
	}
	if (e.kind == GS_K_POOL) {
		pool_after_free(&e);
	} else {
		gs_credit(e.size);
		gs_note_live(-1);
	}
	return r;
}

/* The pre-3.2 entry points take 32-bit sizes and pointers; nothing built in
 * the last fifteen years calls them, and charging them would need their own
 * bookkeeping, so they are refused while a limit is enforced. */
static CUresult legacy_refused(const char *name)
{
	gs_log("%s (the 32-bit pre-CUDA-3.2 entry point) is not supported under a memory limit", name);
	return CUDA_ERROR_NOT_SUPPORTED;
}

GS_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	NEED_REAL(real, cuMemAlloc);
	return gs_ensure() == GS_OFF ? real(dptr, bytesize) : legacy_refused("cuMemAlloc");
}

GS_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width, unsigned int height,
				   unsigned int elem)
{
	NEED_REAL(real, cuMemAllocPitch);
	return gs_ensure() == GS_OFF ? real(dptr, pitch, width, height, elem) : legacy_refused("cuMemAllocPitch");
}

GS_EXPORT CUresult cuArrayCreate(CUarray *handle, const void *desc)
{
	NEED_REAL(real, cuArrayCreate);
	return gs_ensure() == GS_OFF ? real(handle, desc) : legacy_refused("cuArrayCreate");
}

GS_EXPORT CUresult cuArray3DCreate(CUarray *handle, const void *desc)
{
	NEED_REAL(real, cuArray3DCreate);
	return gs_ensure() == GS_OFF ? real(handle, desc) : legacy_refused("cuArray3DCreate");
}

/* ---- arrays ---- */

static uint64_t element_bytes(CUarray_format f, unsigned int channels)
{
	uint64_t b;
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: b = 1; break;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: b = 2; break;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: b = 4; break;
	default: return 16; /* packed or compressed formats: at most 16 bytes per element */
	}
	return b * (channels ? channels : 1);
}

static uint64_t mul3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t r;
	if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r))
		return UINT64_MAX;
	return r;
}

#define ATLEAST1(x) ((x) ? (uint64_t)(x) : 1ull)

/* Arrays are stored in tiles whose padding the driver does not report; the
 * estimate is rounded up to 64 KiB. */
static uint64_t array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned int ch)
{
	uint64_t n = mul3(ATLEAST1(w), ATLEAST1(h), ATLEAST1(d));
	uint64_t b = mul3(n, element_bytes(f, ch), 1);
	return round_up(b, ARRAY_ROUND);
}

static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels)
{
	uint64_t total = 0;
	bool layers = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
	for (unsigned int l = 0; l < levels && l < 64; l++) {
		uint64_t w = ATLEAST1(d->Width >> l), h = ATLEAST1(d->Height >> l);
		uint64_t dd = layers ? ATLEAST1(d->Depth) : ATLEAST1(d->Depth >> l);
		uint64_t b = mul3(mul3(w, h, dd), element_bytes(d->Format, d->NumChannels), 1);
		if (__builtin_add_overflow(total, b, &total))
			return UINT64_MAX;
	}
	return round_up(total, ARRAY_ROUND);
}

static CUresult array_done(CUresult r, uint64_t key, uint64_t size, uint32_t kind)
{
	if (r != CUDA_SUCCESS) {
		gs_credit(size);
		return r;
	}
	if (size)
		record(T_ARRAY, key, size, current_ctx(), kind);
	return r;
}

GS_EXPORT CUresult cuArrayCreate_v2(CUarray *handle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
	NEED_REAL(real, cuArrayCreate_v2);
	if (gs_ensure() == GS_OFF || !desc || !handle)
		return real(handle, desc);
	uint64_t size = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
	if (gs_charge(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(handle, desc);
	return array_done(r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*handle : 0, size, GS_K_ARRAY);
}

GS_EXPORT CUresult cuArray3DCreate_v2(CUarray *handle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
	NEED_REAL(real, cuArray3DCreate_v2);
	if (gs_ensure() == GS_OFF || !desc || !handle)
		return real(handle, desc);
	/* sparse and deferred-mapping arrays get their memory from cuMemCreate */
	uint64_t size = (desc->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING))
				? 0
				: array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
	if (gs_charge(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(handle, desc);
	return array_done(r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*handle : 0, size, GS_K_ARRAY);
}

GS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *handle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
					  unsigned int levels)
{
	NEED_REAL(real, cuMipmappedArrayCreate);
	if (gs_ensure() == GS_OFF || !desc || !handle)
		return real(handle, desc, levels);
	uint64_t size = (desc->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) ? 0
											       : mipmap_bytes(desc, levels);
	if (gs_charge(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(handle, desc, levels);
	return array_done(r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*handle : 0, size, GS_K_MIPMAP);
}

static CUresult array_destroy(CUresult (*real)(void *), void *handle)
{
	if (gs_ensure() != GS_ENFORCE)
		return real(handle);
	struct gs_entry e;
	bool had = gs_table_take(T_ARRAY, (uint64_t)(uintptr_t)handle, &e);
	CUresult r = real(handle);
	if (!had)
		return r;
	if (r != CUDA_SUCCESS) {
		gs_table_put(T_ARRAY, &e);
		return r;
	}
	gs_credit(e.size);
	gs_note_live(-1);
	return r;
}

GS_EXPORT CUresult cuArrayDestroy(CUarray handle)
{
	NEED_REAL(real, cuArrayDestroy);
	return array_destroy((CUresult(*)(void *))real, handle);
}

GS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle)
{
	NEED_REAL(real, cuMipmappedArrayDestroy);
	return array_destroy((CUresult(*)(void *))real, handle);
}

/* ---- virtual memory management: physical memory is charged at cuMemCreate
 * and credited when the last reference and the last mapping are gone ---- */

static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
struct mapping {
	CUdeviceptr va;
	size_t size;
	CUmemGenericAllocationHandle h;
};
static struct mapping *maps;
static size_t nmaps, capmaps;

static bool is_device_location(const CUmemLocation *l) { return l->type == CU_MEM_LOCATION_TYPE_DEVICE; }

/* vmm_mu held */
static void vmm_maybe_free(struct gs_entry *e)
{
	if (e->refs == 0 && e->maps == 0) {
		gs_table_take(T_VMM, e->key, NULL);
		gs_credit(e->size);
		gs_note_live(-1);
	} else {
		gs_table_put(T_VMM, e);
	}
}

GS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			       unsigned long long flags)
{
	NEED_REAL(real, cuMemCreate);
	if (gs_ensure() == GS_OFF || !prop || !handle || !is_device_location(&prop->location))
		return real(handle, size, prop, flags); /* host memory is not the slice's */
	if (gs_charge(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(handle, size, prop, flags);
	if (r != CUDA_SUCCESS) {
		gs_credit(size);
		return r;
	}
	struct gs_entry e = {.key = *handle, .size = size, .kind = GS_K_VMM, .refs = 1};
	pthread_mutex_lock(&vmm_mu);
	gs_table_put(T_VMM, &e);
	pthread_mutex_unlock(&vmm_mu);
	gs_note_live(1);
	return r;
}

GS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	NEED_REAL(real, cuMemRelease);
	if (gs_ensure() != GS_ENFORCE)
		return real(handle);
	pthread_mutex_lock(&vmm_mu);
	CUresult r = real(handle);
	struct gs_entry e;
	if (r == CUDA_SUCCESS && gs_table_get(T_VMM, handle, &e) && e.refs > 0) {
		e.refs--;
		vmm_maybe_free(&e);
	}
	pthread_mutex_unlock(&vmm_mu);
	return r;
}

GS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	NEED_REAL(real, cuMemRetainAllocationHandle);
	if (gs_ensure() != GS_ENFORCE)
		return real(handle, addr);
	pthread_mutex_lock(&vmm_mu);
	CUresult r = real(handle, addr);
	struct gs_entry e;
	if (r == CUDA_SUCCESS && gs_table_get(T_VMM, *handle, &e)) {
		e.refs++;
		gs_table_put(T_VMM, &e);
	}
	pthread_mutex_unlock(&vmm_mu);
	return r;
}

GS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			    unsigned long long flags)
{
	NEED_REAL(real, cuMemMap);
	if (gs_ensure() != GS_ENFORCE)
		return real(ptr, size, offset, handle, flags);
	pthread_mutex_lock(&vmm_mu);
	CUresult r = real(ptr, size, offset, handle, flags);
	struct gs_entry e;
	if (r == CUDA_SUCCESS && gs_table_get(T_VMM, handle, &e)) {
		if (nmaps == capmaps) {
			size_t nc = capmaps ? capmaps * 2 : 16;
			struct mapping *nm = realloc(maps, nc * sizeof *nm);
			if (!nm) {
				pthread_mutex_unlock(&vmm_mu);
				return r; /* not tracked: credited at release instead */
			}
			maps = nm;
			capmaps = nc;
		}
		maps[nmaps++] = (struct mapping){ptr, size, handle};
		e.maps++;
		gs_table_put(T_VMM, &e);
	}
	pthread_mutex_unlock(&vmm_mu);
	return r;
}

GS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	NEED_REAL(real, cuMemUnmap);
	if (gs_ensure() != GS_ENFORCE)
		return real(ptr, size);
	pthread_mutex_lock(&vmm_mu);
	CUresult r = real(ptr, size);
	if (r == CUDA_SUCCESS) {
		for (size_t i = 0; i < nmaps;) {
			if (maps[i].va >= ptr && maps[i].va < ptr + size) {
				struct gs_entry e;
				if (gs_table_get(T_VMM, maps[i].h, &e) && e.maps > 0) {
					e.maps--;
					vmm_maybe_free(&e);
				}
				maps[i] = maps[--nmaps];
				continue;
			}
			i++;
		}
	}
	pthread_mutex_unlock(&vmm_mu);
	return r;
}

/* ---- stream-ordered allocations: a pool keeps freed memory reserved until
 * it is trimmed, so what is charged per pool is its reserved memory ---- */

#define MAX_POOLS 64
struct pool_rec {
	CUmemoryPool pool;
	pthread_mutex_t mu;
	uint64_t charged; /* bytes charged for this pool */
	uint64_t live;    /* bytes handed out and not yet freed */
	bool host;
	bool destroyed;
};
static struct pool_rec pools[MAX_POOLS];
static int npools; /* records are never removed, only reused */
static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;

static struct pool_rec *pool_find(CUmemoryPool p)
{
	int n = __atomic_load_n(&npools, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		if (__atomic_load_n(&pools[i].pool, __ATOMIC_ACQUIRE) == p)
			return &pools[i];
	return NULL;
}

static struct pool_rec *pool_get(CUmemoryPool p)
{
	struct pool_rec *r = pool_find(p);
	if (r || !p)
		return r;
	pthread_mutex_lock(&pools_mu);
	r = pool_find(p);
	if (!r && npools < MAX_POOLS) {
		r = &pools[npools];
		pthread_mutex_init(&r->mu, NULL);
		r->charged = r->live = 0;
		r->host = r->destroyed = false;
		__atomic_store_n(&r->pool, p, __ATOMIC_RELEASE);
		__atomic_store_n(&npools, npools + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&pools_mu);
	return r;
}

static bool pool_reserved(CUmemoryPool p, uint64_t *out)
{
	__typeof__(&cuMemPoolGetAttribute) f = REAL(cuMemPoolGetAttribute);
	cuuint64_t v = 0;
	if (!f || f(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
		return false;
	*out = v;
	return true;
}

/* rec->mu held. Credits what the pool has given back; returns the bytes. */
static uint64_t pool_reconcile(struct pool_rec *rec)
{
	uint64_t reserved;
	if (rec->destroyed || rec->host || !pool_reserved(rec->pool, &reserved) || reserved >= rec->charged)
		return 0;
	uint64_t back = rec->charged - reserved;
	rec->charged = reserved;
	gs_credit(back);
	return back;
}

int gs_pools_reconcile_all(bool blocking)
{
	uint64_t back = 0;
	int n = __atomic_load_n(&npools, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		struct pool_rec *rec = &pools[i];
		if (!__atomic_load_n(&rec->pool, __ATOMIC_ACQUIRE))
			continue;
		if (blocking)
			pthread_mutex_lock(&rec->mu);
		else if (pthread_mutex_trylock(&rec->mu))
			continue; /* its owner is charging right now */
		back += pool_reconcile(rec);
		pthread_mutex_unlock(&rec->mu);
	}
	return back > 0;
}

static CUmemoryPool current_pool(void)
{
	__typeof__(&cuCtxGetDevice) gd = REAL(cuCtxGetDevice);
	__typeof__(&cuDeviceGetMemPool) gp = REAL(cuDeviceGetMemPool);
	CUdevice dev;
	CUmemoryPool p = NULL;
	if (gd && gp && gd(&dev) == CUDA_SUCCESS && gp(&p, dev) != CUDA_SUCCESS)
		p = NULL;
	return p;
}

static CUresult call_alloc_async(void *real, bool from_pool, CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
				 CUstream stream)
{
	if (from_pool)
		return ((__typeof__(&cuMemAllocFromPoolAsync))real)(dptr, size, pool, stream);
	return ((__typeof__(&cuMemAllocAsync))real)(dptr, size, stream);
}

static CUresult alloc_async(void *real, bool from_pool, CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
			    CUstream stream, void *real_free)
{
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	if (gs_ensure() == GS_OFF)
		return call_alloc_async(real, from_pool, dptr, size, pool, stream);
	CUmemoryPool p = from_pool ? pool : current_pool();
	struct pool_rec *rec = pool_get(p);
	if (rec && rec->host)
		return call_alloc_async(real, from_pool, dptr, size, pool, stream);
	if (!rec) {
		/* a pool we cannot track: charge the allocation itself */
		if (gs_charge(size))
			return CUDA_ERROR_OUT_OF_MEMORY;
		CUresult r = call_alloc_async(real, from_pool, dptr, size, pool, stream);
		if (r != CUDA_SUCCESS)
			gs_credit(size);
		else
			record(T_LINEAR, *dptr, size, current_ctx(), GS_K_LINEAR);
		return r;
	}
	pthread_mutex_lock(&rec->mu);
	uint64_t cached = rec->charged > rec->live ? rec->charged - rec->live : 0;
	uint64_t need = size > cached ? round_up(size - cached, POOL_GRANULE) : 0;
	if (gs_charge(need)) {
		pthread_mutex_unlock(&rec->mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	CUresult r = call_alloc_async(real, from_pool, dptr, size, pool, stream);
	if (r != CUDA_SUCCESS) {
		gs_credit(need);
		pthread_mutex_unlock(&rec->mu);
		return r;
	}
	rec->charged += need;
	rec->live += size;
	uint64_t reserved;
	if (pool_reserved(p, &reserved) && reserved > rec->charged) {
		/* the pool grew by more than the estimate */
		uint64_t extra = reserved - rec->charged;
		if (gs_charge(extra)) {
			((__typeof__(&cuMemFreeAsync))real_free)(*dptr, stream);
			__typeof__(&cuStreamSynchronize) sync = REAL(cuStreamSynchronize);
			__typeof__(&cuMemPoolTrimTo) trim = REAL(cuMemPoolTrimTo);
			rec->live -= size;
			if (sync)
				sync(stream);
			if (trim)
				trim(p, rec->live);
			pool_reconcile(rec);
			pthread_mutex_unlock(&rec->mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		rec->charged = reserved;
	} else {
		pool_reconcile(rec); /* e.g. during stream capture nothing was reserved */
	}
	struct gs_entry e = {.key = *dptr, .size = size, .aux = (uint64_t)(uintptr_t)rec, .kind = GS_K_POOL};
	gs_table_put(T_LINEAR, &e);
	gs_note_live(1);
	pthread_mutex_unlock(&rec->mu);
	return r;
}

static void pool_after_free(const struct gs_entry *e)
{
	struct pool_rec *rec = (struct pool_rec *)(uintptr_t)e->aux;
	gs_note_live(-1);
	pthread_mutex_lock(&rec->mu);
	rec->live = rec->live >= e->size ? rec->live - e->size : 0;
	if (rec->destroyed && rec->live == 0) {
		gs_credit(rec->charged);
		rec->charged = 0;
		__atomic_store_n(&rec->pool, NULL, __ATOMIC_RELEASE);
	} else {
		pool_reconcile(rec);
	}
	pthread_mutex_unlock(&rec->mu);
}

static CUresult free_async(void *realp, CUdeviceptr dptr, CUstream stream)
{
	if (!realp)
		return CUDA_ERROR_NOT_FOUND;
	__typeof__(&cuMemFreeAsync) real = (__typeof__(&cuMemFreeAsync))realp;
	if (gs_ensure() != GS_ENFORCE)
		return real(dptr, stream);
	struct gs_entry e;
	bool had = gs_table_take(T_LINEAR, dptr, &e);
	CUresult r = real(dptr, stream);
	if (!had)
		return r;
	if (r != CUDA_SUCCESS) {
		gs_table_put(T_LINEAR, &e);
		return r;
	}
	if (e.kind == GS_K_POOL) {
		pool_after_free(&e);
	} else {
		gs_credit(e.size);
		gs_note_live(-1);
	}
	return r;
}

GS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
	return alloc_async(gs_real(GS_IDX_cuMemAllocAsync), false, dptr, bytesize, NULL, stream,
			   gs_real(GS_IDX_cuMemFreeAsync));
}

GS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
	return alloc_async(gs_real(GS_IDX_cuMemAllocAsync_ptsz), false, dptr, bytesize, NULL, stream,
			   gs_real(GS_IDX_cuMemFreeAsync_ptsz));
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)
{
	return alloc_async(gs_real(GS_IDX_cuMemAllocFromPoolAsync), true, dptr, bytesize, pool, stream,
			   gs_real(GS_IDX_cuMemFreeAsync));
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
						CUstream stream)
{
	return alloc_async(gs_real(GS_IDX_cuMemAllocFromPoolAsync_ptsz), true, dptr, bytesize, pool, stream,
			   gs_real(GS_IDX_cuMemFreeAsync_ptsz));
}

GS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
	return free_async(gs_real(GS_IDX_cuMemFreeAsync), dptr, stream);
}

GS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
	return free_async(gs_real(GS_IDX_cuMemFreeAsync_ptsz), dptr, stream);
}

GS_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	NEED_REAL(real, cuMemPoolCreate);
	CUresult r = real(pool, props);
	if (r != CUDA_SUCCESS || gs_ensure() != GS_ENFORCE)
		return r;
	struct pool_rec *rec = pool_get(*pool);
	if (rec) {
		pthread_mutex_lock(&rec->mu);
		rec->charged = rec->live = 0; /* a handle the driver reused */
		rec->destroyed = false;
		rec->host = props && !is_device_location(&props->location);
		pthread_mutex_unlock(&rec->mu);
	}
	return r;
}

GS_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	NEED_REAL(real, cuMemPoolDestroy);
	CUresult r = real(pool);
	if (r != CUDA_SUCCESS || gs_ensure() != GS_ENFORCE)
		return r;
	struct pool_rec *rec = pool_find(pool);
	if (rec) {
		/* the driver releases the pool's memory once its last allocation
		 * is freed */
		pthread_mutex_lock(&rec->mu);
		rec->destroyed = true;
		if (rec->live == 0) {
			gs_credit(rec->charged);
			rec->charged = 0;
			__atomic_store_n(&rec->pool, NULL, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&rec->mu);
	}
	return r;
}

GS_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
	NEED_REAL(real, cuMemPoolTrimTo);
	CUresult r = real(pool, keep);
	if (r != CUDA_SUCCESS || gs_ensure() != GS_ENFORCE)
		return r;
	struct pool_rec *rec = pool_find(pool);
	if (rec) {
		pthread_mutex_lock(&rec->mu);
		pool_reconcile(rec);
		pthread_mutex_unlock(&rec->mu);
	}
	return r;
}

/* Pools give memory back at synchronisation (their release threshold). */
static void after_sync(void)
{
	if (__atomic_load_n(&npools, __ATOMIC_ACQUIRE) && gs_ensure() == GS_ENFORCE)
		gs_pools_reconcile_all(true);
}

GS_EXPORT CUresult cuCtxSynchronize(void)
{
	NEED_REAL(real, cuCtxSynchronize);
	CUresult r = real();
	after_sync();
	return r;
}

GS_EXPORT CUresult cuStreamSynchronize(CUstream stream)
{
	NEED_REAL(real, cuStreamSynchronize);
	CUresult r = real(stream);
	after_sync();
	return r;
}

GS_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream)
{
	NEED_REAL(real, cuStreamSynchronize_ptsz);
	CUresult r = real(stream);
	after_sync();
	return r;
}

/* ---- contexts: each costs device memory of its own ---- */

#define MAX_DEVICES 64
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static int prim_refs[MAX_DEVICES];
static CUcontext prim_ctx[MAX_DEVICES];

/* Credits what a destroyed context still held. */
static void context_gone(CUcontext ctx)
{
	uint64_t n1 = 0, n2 = 0;
	uint64_t b = gs_table_sweep(T_LINEAR, (uint64_t)(uintptr_t)ctx, 1u << GS_K_LINEAR, &n1);
	b += gs_table_sweep(T_ARRAY, (uint64_t)(uintptr_t)ctx, (1u << GS_K_ARRAY) | (1u << GS_K_MIPMAP), &n2);
	gs_credit(b);
	gs_note_live(-(int64_t)(n1 + n2));
	gs_pace_forget_context(ctx);
}

static int ctx_pre(void)
{
	int m = gs_ensure();
	if (m == GS_OFF)
		return 0;
	return gs_charge_context(gs.cfg.ctx_overhead) ? -1 : 1;
}

static CUresult ctx_post(int pre, CUresult r, uint64_t key)
{
	if (pre != 1)
		return r;
	if (r != CUDA_SUCCESS) {
		gs_credit_context(gs.cfg.ctx_overhead);
		return r;
	}
	struct gs_entry e = {.key = key, .size = gs.cfg.ctx_overhead, .kind = GS_K_CTX};
	gs_table_put(T_CTX, &e);
	return r;
}

GS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate_v2);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags,
				  CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate_v3);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, params, n, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate_v4);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, params, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
	NEED_REAL(real, cuGreenCtxCreate);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(phCtx, desc, dev, flags);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*phCtx : 0);
}

static CUresult ctx_destroy(CUresult r, void *ctx, bool green)
{
	if (r != CUDA_SUCCESS || gs_ensure() != GS_ENFORCE)
		return r;
	struct gs_entry e;
	if (gs_table_take(T_CTX, (uint64_t)(uintptr_t)ctx, &e))
		gs_credit_context(e.size);
	if (!green)
		context_gone((CUcontext)ctx);
	return r;
}

GS_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	NEED_REAL(real, cuCtxDestroy);
	return ctx_destroy(real(ctx), ctx, false);
}

GS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	NEED_REAL(real, cuCtxDestroy_v2);
	return ctx_destroy(real(ctx), ctx, false);
}

GS_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx ctx)
{
	NEED_REAL(real, cuGreenCtxDestroy);
	return ctx_destroy(real(ctx), ctx, true);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxRetain);
	if (gs_ensure() == GS_OFF || dev < 0 || dev >= MAX_DEVICES)
		return real(pctx, dev);
	pthread_mutex_lock(&ctx_mu);
	bool first = prim_refs[dev] == 0;
	if (first && gs_charge_context(gs.cfg.ctx_overhead)) {
		pthread_mutex_unlock(&ctx_mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	CUresult r = real(pctx, dev);
	if (r != CUDA_SUCCESS) {
		if (first)
			gs_credit_context(gs.cfg.ctx_overhead);
	} else {
		prim_refs[dev]++;
		prim_ctx[dev] = *pctx;
	}
	pthread_mutex_unlock(&ctx_mu);
	return r;
}

static CUresult primary_release(CUresult (*real)(CUdevice), CUdevice dev)
{
	if (gs_ensure() == GS_OFF || dev < 0 || dev >= MAX_DEVICES)
		return real(dev);
	pthread_mutex_lock(&ctx_mu);
	CUresult r = real(dev);
	if (r == CUDA_SUCCESS && prim_refs[dev] > 0 && --prim_refs[dev] == 0) {
		/* the driver destroys the primary context with its last reference */
		gs_credit_context(gs.cfg.ctx_overhead);
		context_gone(prim_ctx[dev]);
		prim_ctx[dev] = NULL;
	}
	pthread_mutex_unlock(&ctx_mu);
	return r;
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxRelease);
	return primary_release(real, dev);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxRelease_v2);
	return primary_release(real, dev);
}

static CUresult primary_reset(CUresult (*real)(CUdevice), CUdevice dev)
{
	if (gs_ensure() == GS_OFF || dev < 0 || dev >= MAX_DEVICES)
		return real(dev);
	pthread_mutex_lock(&ctx_mu);
	CUresult r = real(dev);
	/* every allocation of the primary context is destroyed; the context
	 * itself stays retained and is charged until its last release */
	if (r == CUDA_SUCCESS && prim_ctx[dev])
		context_gone(prim_ctx[dev]);
	pthread_mutex_unlock(&ctx_mu);
	return r;
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxReset);
	return primary_reset(real, dev);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxReset_v2);
	return primary_reset(real, dev);
}

/* ---- what the driver and NVML report ---- */

GS_EXPORT CUresult cuInit(unsigned int flags)
{
	NEED_REAL(real, cuInit);
	if (gs_ensure() == GS_BROKEN)
		return CUDA_ERROR_NOT_INITIALIZED; /* the reason was logged once */
	return real(flags);
}

/* total = the slice (never more than the device), used = the claim's use,
 * free = what is left of the slice, or less if the device has less. */
static bool slice_view(uint64_t real_total, uint64_t real_free, uint64_t *total, uint64_t *free, uint64_t *used)
{
	int m = gs_ensure();
	if (m == GS_OFF)
		return false;
	uint64_t lim = gs_limit();
	uint64_t t = lim && lim < real_total ? lim : real_total;
	uint64_t u = m == GS_ENFORCE ? gs_used() : t;
	if (u > t)
		u = t;
	uint64_t f = t - u;
	if (f > real_free)
		f = real_free;
	*total = t;
	*free = f;
	*used = u;
	return true;
}

GS_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	NEED_REAL(real, cuMemGetInfo_v2);
	size_t rf = 0, rt = 0;
	CUresult r = real(&rf, &rt);
	uint64_t t, f, u;
	if (r == CUDA_SUCCESS && slice_view(rt, rf, &t, &f, &u)) {
		rf = f;
		rt = t;
	}
	if (free)
		*free = rf;
	if (total)
		*total = rt;
	return r;
}

GS_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	NEED_REAL(real, cuMemGetInfo);
	unsigned int rf = 0, rt = 0;
	CUresult r = real(&rf, &rt);
	uint64_t t, f, u;
	if (r == CUDA_SUCCESS && slice_view(rt, rf, &t, &f, &u)) {
		rf = (unsigned int)(f > 0xffffffffull ? 0xffffffffull : f);
		rt = (unsigned int)(t > 0xffffffffull ? 0xffffffffull : t);
	}
	if (free)
		*free = rf;
	if (total)
		*total = rt;
	return r;
}

GS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	NEED_REAL(real, cuDeviceTotalMem_v2);
	CUresult r = real(bytes, dev);
	uint64_t t, f, u;
	if (r == CUDA_SUCCESS && bytes && slice_view(*bytes, *bytes, &t, &f, &u))
		*bytes = t;
	return r;
}

GS_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	NEED_REAL(real, cuDeviceTotalMem);
	CUresult r = real(bytes, dev);
	uint64_t t, f, u;
	if (r == CUDA_SUCCESS && bytes && slice_view(*bytes, *bytes, &t, &f, &u))
		*bytes = (unsigned int)t;
	return r;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	__typeof__(&nvmlDeviceGetMemoryInfo) real = REAL(nvmlDeviceGetMemoryInfo);
	if (!real)
		return NVML_ERROR_FUNCTION_NOT_FOUND;
	nvmlReturn_t r = real(device, memory);
	uint64_t t, f, u;
	if (r == NVML_SUCCESS && memory && slice_view(memory->total, memory->free, &t, &f, &u)) {
		memory->total = t;
		memory->free = f;
		memory->used = u;
	}
	return r;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	__typeof__(&nvmlDeviceGetMemoryInfo_v2) real = REAL(nvmlDeviceGetMemoryInfo_v2);
	if (!real)
		return NVML_ERROR_FUNCTION_NOT_FOUND;
	nvmlReturn_t r = real(device, memory);
	uint64_t t, f, u;
	if (r == NVML_SUCCESS && memory && slice_view(memory->total, memory->free, &t, &f, &u)) {
		memory->total = t;
		memory->reserved = 0; /* the driver's reservation is not the slice's */
		memory->free = f;
		memory->used = u;
	}
	return r;
}

void gs_mem_after_fork(void)
{
	for (int i = 0; i < GS_NTABLES; i++)
		gs_table_reset(gs_table_at(i));
	pthread_mutex_init(&vmm_mu, NULL);
	pthread_mutex_init(&ctx_mu, NULL);
	pthread_mutex_init(&pools_mu, NULL);
	nmaps = 0;
	for (int i = 0; i < MAX_POOLS; i++) {
		pools[i].pool = NULL;
		pthread_mutex_init(&pools[i].mu, NULL);
	}
	npools = 0;
	memset(prim_refs, 0, sizeof prim_refs);
	memset(prim_ctx, 0, sizeof prim_ctx);
}
