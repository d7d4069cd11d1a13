/*
 * The fake libnvidia-ml's MIG mode, as a real driver shows it inside a
 * container given one MIG instance: its GPU in MIG mode, and under it one
 * MIG device, index 0, with the instance's UUID, name and memory
 * (fakedevice.c reads them from the environment). Without a MIG instance
 * the GPU is a V100, which has no MIG.
 */
#define _GNU_SOURCE
#include "fakenvml.h"

/* A100 and H100 hold up to 7 MIG devices; only the container's is there. */
#define MAX_MIG_DEVICES 7

API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending)
{
	CHECK();
	if (d != &fake_gpu0 || !current || !pending)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!fake_mig_uuid())
		return NVML_ERROR_NOT_SUPPORTED;
	*current = *pending = 1;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count)
{
	CHECK();
	if (d != &fake_gpu0 || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!fake_mig_uuid())
		return NVML_ERROR_NOT_SUPPORTED;
	*count = MAX_MIG_DEVICES;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index, nvmlDevice_t *mig)
{
	CHECK();
	if (d != &fake_gpu0 || !mig || index >= MAX_MIG_DEVICES)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!fake_mig_uuid())
		return NVML_ERROR_NOT_SUPPORTED;
	if (index != 0)
		return NVML_ERROR_NOT_FOUND;
	*mig = &fake_mig0;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t d, unsigned int *isMig)
{
	CHECK();
	if ((d != &fake_gpu0 && d != &fake_mig0) || !isMig)
		return NVML_ERROR_INVALID_ARGUMENT;
	*isMig = d == &fake_mig0;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *d)
{
	CHECK();
	if (mig != &fake_mig0 || !fake_mig_uuid() || !d)
		return NVML_ERROR_INVALID_ARGUMENT;
	*d = &fake_gpu0;
	return NVML_SUCCESS;
}
