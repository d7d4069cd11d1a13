/*
 * The fake driver's memory pools: they grow in FAKEGPU_POOL_GRANULE steps
 * and keep freed memory reserved until trimmed, or until the device
 * synchronises (down to their release threshold).
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fakecuda.h"

/* F.mu held */
void pool_trim_locked(struct pool *p, uint64_t keep)
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
	tab_put((struct alloc){.key = va, .size = size, .ctx = c, .pool = p, .kind = FAKE_POOL});
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
void sync_pools(void)
{
	pthread_mutex_lock(&F.mu);
	for (struct pool *p = F.pools; p; p = p->next)
		if (p->reserved > p->threshold)
			pool_trim_locked(p, p->threshold);
	pthread_mutex_unlock(&F.mu);
}
