/*
 * What the driver and NVML report: the slice, not the device. total is the
 * slice (never more than the device), used is the claim's use, free is what
 * is left of the slice, or less if the device has less.
 *
 * A budget larger than the device belongs to a claim of several whole GPUs
 * (the node plugin gives it the GPUs' memory together): the device is the
 * claim's alone, so its own figures are the truth. The claim-wide use would
 * count the other GPUs' memory against this one and show a half-empty GPU
 * as full.
 */
#define _GNU_SOURCE
#include "shim_internal.h"

static bool slice_view(uint64_t real_total, uint64_t real_free, uint64_t *total, uint64_t *free, uint64_t *used)
{
	int m = gs_ensure();
	uint64_t lim = gs_limit();
	if (m == GS_ENFORCE && lim > real_total)
		return false;
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
