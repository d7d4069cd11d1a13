/*
 * The fake driver's initialisation, its one device (a V100, or the MIG
 * instance of fakedevice.c) and version.
 */
#define _GNU_SOURCE
#include <string.h>

#include "fakecuda.h"

API CUresult cuInit(unsigned int flags)
{
	(void)flags;
	fake_shared();
	pthread_mutex_lock(&F.mu);
	F.inited = true;
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}


API CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 12080;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *n)
{
	CHECK_INIT();
	*n = 1;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	CHECK_INIT();
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	fake_device_name(name, (size_t)len);
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !v)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case 75: fake_compute_capability(v, &(int){0}); break; /* compute capability major */
	case 76: fake_compute_capability(&(int){0}, v); break; /* minor */
	case 16: *v = 80; break; /* multiprocessors */
	default: *v = 0;
	}
	return CUDA_SUCCESS;
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = fake_usable_mem();
	return CUDA_SUCCESS;
}

API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = 0xffffffffu;
	return CUDA_SUCCESS;
}

API CUresult cuGetErrorString(CUresult e, const char **s)
{
	switch (e) {
	case CUDA_SUCCESS: *s = "no error"; break;
	case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
	case CUDA_ERROR_NOT_INITIALIZED: *s = "initialization error"; break;
	default: *s = "error";
	}
	return CUDA_SUCCESS;
}
