/*
 * Linear device memory (cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged,
 * cuMemFree): charged before the driver is asked, credited when the driver
 * fails or the memory is freed.
 */
#define _GNU_SOURCE
#include "alloc.h"

#define PITCH_ALIGN 512ull

GS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	NEED_REAL(real, cuMemAlloc_v2);
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

void gs_linear_freed(const struct gs_entry *e)
{
	if (e->kind == GS_K_POOL) {
		gs_pool_freed(e);
	} else {
		gs_credit(e->size);
		gs_note_live(-1);
	}
}

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
	gs_linear_freed(&e);
	return r;
}

/* The pre-3.2 entry points take 32-bit sizes and pointers; nothing built in
 * the last fifteen years calls them, and charging them would need their own
 * bookkeeping, so they are refused while a limit is enforced. */
CUresult gs_legacy_refused(const char *name)
{
	gs_log("%s (the 32-bit pre-CUDA-3.2 entry point) is not supported under a memory limit", name);
	return CUDA_ERROR_NOT_SUPPORTED;
}

GS_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	NEED_REAL(real, cuMemAlloc);
	(void)real;
	return gs_legacy_refused("cuMemAlloc");
}

GS_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width, unsigned int height,
				   unsigned int elem)
{
	NEED_REAL(real, cuMemAllocPitch);
	(void)real;
	return gs_legacy_refused("cuMemAllocPitch");
}
