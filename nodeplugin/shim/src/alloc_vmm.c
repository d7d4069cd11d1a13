/*
 * Virtual memory management: physical memory is charged at cuMemCreate and
 * credited when the last reference and the last mapping are gone (the
 * driver frees it only then).
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "alloc.h"

static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
struct mapping {
	CUdeviceptr va;
	size_t size;
	CUmemGenericAllocationHandle h;
};
static struct mapping *maps;
static size_t nmaps, capmaps;

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
	if (!prop || !handle || !is_device_location(&prop->location))
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

void gs_vmm_after_fork(void)
{
	pthread_mutex_init(&vmm_mu, NULL);
	nmaps = 0;
}
