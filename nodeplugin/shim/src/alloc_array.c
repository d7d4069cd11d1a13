/*
 * CUDA arrays and mipmapped arrays. The driver does not report their size:
 * it is estimated from the descriptor and charged in full.
 */
#define _GNU_SOURCE
#include "alloc.h"

#define ARRAY_ROUND (64 * 1024ull)

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
	if (!desc || !handle)
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
	if (!desc || !handle)
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
	if (!desc || !handle)
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

GS_EXPORT CUresult cuArrayCreate(CUarray *handle, const void *desc)
{
	NEED_REAL(real, cuArrayCreate);
	(void)real;
	return gs_legacy_refused("cuArrayCreate");
}

GS_EXPORT CUresult cuArray3DCreate(CUarray *handle, const void *desc)
{
	NEED_REAL(real, cuArray3DCreate);
	(void)real;
	return gs_legacy_refused("cuArray3DCreate");
}
