/*
 * Stream-ordered allocations (cuMemAllocAsync, cuMemAllocFromPoolAsync): a
 * pool keeps freed memory reserved until it is trimmed, so what is charged
 * per pool is its reserved memory, reconciled with the driver's count when
 * the pool can have given some back (a free, a trim, a synchronisation).
 */
#define _GNU_SOURCE
#include "alloc.h"

#define MiB (1024ull * 1024ull)
#define POOL_GRANULE (2 * MiB) /* the driver grows pools in 2 MiB pages */

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

void gs_pool_freed(const struct gs_entry *e)
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
	gs_linear_freed(&e);
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

void gs_pools_after_fork(void)
{
	pthread_mutex_init(&pools_mu, NULL);
	for (int i = 0; i < MAX_POOLS; i++) {
		pools[i].pool = NULL;
		pthread_mutex_init(&pools[i].mu, NULL);
	}
	npools = 0;
}
