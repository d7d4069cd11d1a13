/*
 * The fake driver's memory info, linear allocations and frees. The
 * pre-CUDA-3.2 32-bit entry points are refused, as a 64-bit driver does.
 */
#define _GNU_SOURCE
#include "fakecuda.h"

API CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	uint64_t used = __atomic_load_n(&fake_shared()->mem_used, __ATOMIC_ACQUIRE);
	*free = fake_usable_mem() - used;
	*total = fake_usable_mem();
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

CUresult linear_alloc(CUdeviceptr *dptr, uint64_t size, uint64_t charge)
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
	tab_put((struct alloc){.key = va, .size = charge, .ctx = c, .kind = FAKE_LINEAR});
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

CUresult free_any(CUdeviceptr dptr)
{
	struct alloc a;
	pthread_mutex_lock(&F.mu);
	if (!tab_take(dptr, &a)) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a.kind == FAKE_ARRAY) {
		tab_put(a);
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a.kind == FAKE_POOL) {
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
