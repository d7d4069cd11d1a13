/*
 * The fake driver's cuGetProcAddress: the newest variant of a function the
 * requested CUDA version had.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

struct proc {
	const char *base;
	void *fn;
	int version;
	bool ptsz;
};

#define P(b, f, v) {#b, (void *)&f, v, false}
#define PT(b, f, v) {#b, (void *)&f, v, true}

static const struct proc procs[] = {
	P(cuInit, cuInit, 2000), P(cuDriverGetVersion, cuDriverGetVersion, 2020),
	P(cuDeviceGet, cuDeviceGet, 2000), P(cuDeviceGetCount, cuDeviceGetCount, 2000),
	P(cuDeviceGetName, cuDeviceGetName, 2000), P(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000),
	P(cuDeviceTotalMem, cuDeviceTotalMem, 2000), P(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020),
	P(cuGetErrorString, cuGetErrorString, 6000),
	P(cuCtxCreate, cuCtxCreate, 2000), P(cuCtxCreate, cuCtxCreate_v2, 3020),
	P(cuCtxCreate, cuCtxCreate_v3, 11040), P(cuCtxCreate, cuCtxCreate_v4, 12050),
	P(cuCtxDestroy, cuCtxDestroy, 2000), P(cuCtxDestroy, cuCtxDestroy_v2, 4000),
	P(cuCtxGetCurrent, cuCtxGetCurrent, 4000), P(cuCtxSetCurrent, cuCtxSetCurrent, 4000),
	P(cuCtxGetDevice, cuCtxGetDevice, 2000), P(cuCtxSynchronize, cuCtxSynchronize, 2000),
	P(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000), P(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000),
	P(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000),
	P(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000),
	P(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000),
	P(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000),
	P(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000),
	P(cuGreenCtxCreate, cuGreenCtxCreate, 12040), P(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040),
	P(cuMemGetInfo, cuMemGetInfo, 2000), P(cuMemGetInfo, cuMemGetInfo_v2, 3020),
	P(cuMemAlloc, cuMemAlloc, 2000), P(cuMemAlloc, cuMemAlloc_v2, 3020),
	P(cuMemAllocPitch, cuMemAllocPitch, 2000), P(cuMemAllocPitch, cuMemAllocPitch_v2, 3020),
	P(cuMemFree, cuMemFree, 2000), P(cuMemFree, cuMemFree_v2, 3020),
	P(cuMemAllocManaged, cuMemAllocManaged, 6000),
	P(cuMemCreate, cuMemCreate, 10020), P(cuMemRelease, cuMemRelease, 10020),
	P(cuMemAddressReserve, cuMemAddressReserve, 10020), P(cuMemAddressFree, cuMemAddressFree, 10020),
	P(cuMemMap, cuMemMap, 10020), P(cuMemUnmap, cuMemUnmap, 10020),
	P(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000),
	P(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020),
	P(cuMemAllocAsync, cuMemAllocAsync, 11020), PT(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020),
	P(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020),
	PT(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020),
	P(cuMemFreeAsync, cuMemFreeAsync, 11020), PT(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020),
	P(cuMemPoolCreate, cuMemPoolCreate, 11020), P(cuMemPoolDestroy, cuMemPoolDestroy, 11020),
	P(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020), P(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020),
	P(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020), P(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020),
	P(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020),
	P(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020),
	P(cuArrayCreate, cuArrayCreate, 2000), P(cuArrayCreate, cuArrayCreate_v2, 3020),
	P(cuArray3DCreate, cuArray3DCreate, 2000), P(cuArray3DCreate, cuArray3DCreate_v2, 3020),
	P(cuArrayDestroy, cuArrayDestroy, 2000), P(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000),
	P(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000),
	P(cuModuleLoadData, cuModuleLoadData, 2000), P(cuModuleGetFunction, cuModuleGetFunction, 2000),
	P(cuModuleUnload, cuModuleUnload, 2000),
	P(cuLaunchKernel, cuLaunchKernel, 4000), PT(cuLaunchKernel, cuLaunchKernel_ptsz, 7000),
	P(cuLaunchKernelEx, cuLaunchKernelEx, 11060), PT(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060),
	P(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000),
	PT(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000),
	P(cuGraphCreate, cuGraphCreate, 10000), P(cuGraphAddKernelNode, cuGraphAddKernelNode, 10000),
	P(cuGraphInstantiate, cuGraphInstantiateWithFlags, 11040), P(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040),
	P(cuGraphLaunch, cuGraphLaunch, 10000), PT(cuGraphLaunch, cuGraphLaunch_ptsz, 10000),
	P(cuGraphExecDestroy, cuGraphExecDestroy, 10000), P(cuGraphDestroy, cuGraphDestroy, 10000),
	P(cuStreamCreate, cuStreamCreate, 2000), P(cuStreamDestroy, cuStreamDestroy_v2, 4000),
	P(cuStreamSynchronize, cuStreamSynchronize, 2000), PT(cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000),
	P(cuEventCreate, cuEventCreate, 2000), P(cuEventRecord, cuEventRecord, 2000),
	PT(cuEventRecord, cuEventRecord_ptsz, 7000), P(cuEventQuery, cuEventQuery, 2000),
	P(cuEventSynchronize, cuEventSynchronize, 2000), P(cuEventElapsedTime, cuEventElapsedTime, 2000),
	P(cuEventDestroy, cuEventDestroy_v2, 4000),
	P(cuGetProcAddress, cuGetProcAddress, 11030), P(cuGetProcAddress, cuGetProcAddress_v2, 12000),
};

/* With FAKEGPU_PROC_UNEXPORTED=1, cuGetProcAddress("cuMemAlloc") returns
 * this function, which is not an exported symbol: what a driver that hands
 * out internal entry points (or a variant newer than the shim) looks like. */
static CUresult internal_mem_alloc(CUdeviceptr *dptr, size_t size) { return linear_alloc(dptr, size, size); }

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	const char *unexported = getenv("FAKEGPU_PROC_UNEXPORTED");
	if (unexported && !strcmp(unexported, "1") && !strcmp(symbol, "cuMemAlloc") && version >= 3020) {
		*pfn = (void *)internal_mem_alloc;
		if (status)
			*status = CU_GET_PROC_ADDRESS_SUCCESS;
		return CUDA_SUCCESS;
	}
	bool want_ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	const struct proc *best = NULL;
	bool known = false;
	for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) {
		const struct proc *p = &procs[i];
		if (strcmp(p->base, symbol))
			continue;
		known = true;
		if (p->version > version || (p->ptsz && !want_ptsz))
			continue;
		/* prefer the per-thread variant when asked, then the newest */
		if (!best || (p->ptsz && !best->ptsz) ||
		    (p->ptsz == best->ptsz && p->version > best->version))
			best = p;
	}
	*pfn = best ? best->fn : NULL;
	if (status)
		*status = best ? CU_GET_PROC_ADDRESS_SUCCESS
			       : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return get_proc(symbol, pfn, version, flags, NULL);
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				 CUdriverProcAddressQueryResult *status)
{
	return get_proc(symbol, pfn, version, flags, status);
}
