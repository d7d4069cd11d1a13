/*
 * The fake driver's virtual memory management: a handle's memory is freed
 * after its last release and its last unmap.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fakecuda.h"

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
