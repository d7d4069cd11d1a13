/*
 * The fake driver's arrays: they hold device memory by their descriptor's
 * size; sparse and deferred-mapping arrays hold none.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fakecuda.h"

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
	tab_put((struct alloc){.key = (uint64_t)(uintptr_t)h, .size = size, .ctx = c, .kind = FAKE_ARRAY});
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
	if (a.kind != FAKE_ARRAY) {
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
