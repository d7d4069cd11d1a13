/*
 * A test-only libnvidia-ml.so.1 for the simulated V100 of fakegpu.h: what
 * the shim, gpuslice-smi and the node plugin's own discovery and process
 * accounting (through go-nvml) read. In a MIG claim's container its one GPU
 * is in MIG mode with the claim's instance (fakemig.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "fakenvml.h"

static int inited;
struct nvmlDevice_st fake_gpu0, fake_mig0 = {.mig = 1};
#define dev0 fake_gpu0

int fake_nvml_inited(void) { return __atomic_load_n(&inited, __ATOMIC_ACQUIRE) > 0; }

API nvmlReturn_t nvmlInit_v2(void)
{
	fake_shared();
	__atomic_add_fetch(&inited, 1, __ATOMIC_ACQ_REL);
	return NVML_SUCCESS;
}
API nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags;
	return nvmlInit_v2();
}

API nvmlReturn_t nvmlShutdown(void)
{
	if (__atomic_load_n(&inited, __ATOMIC_ACQUIRE) <= 0)
		return NVML_ERROR_UNINITIALIZED;
	__atomic_sub_fetch(&inited, 1, __ATOMIC_ACQ_REL);
	return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	default: return "Unknown Error";
	}
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len)
{
	CHECK();
	if (!v || len < 10)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	strncpy(v, "580.95.05", len);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	CHECK();
	*n = 1;
	return NVML_SUCCESS;
}
API nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	CHECK();
	if (i != 0 || !d)
		return NVML_ERROR_INVALID_ARGUMENT;
	*d = &dev0;
	return NVML_SUCCESS;
}
API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { return nvmlDeviceGetHandleByIndex_v2(i, d); }

static nvmlReturn_t copy_str(const char *v, char *out, unsigned int len)
{
	if (!out || strlen(v) >= len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(out, v);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
	CHECK();
	char mig[128];
	if (d == &fake_mig0 && fake_mig_uuid()) {
		fake_device_name(mig, sizeof mig);
		return copy_str(mig, name, len);
	}
	return d == &dev0 ? copy_str(fake_name(), name, len) : NVML_ERROR_INVALID_ARGUMENT;
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
	CHECK();
	if (d == &fake_mig0 && fake_mig_uuid())
		return copy_str(fake_mig_uuid(), uuid, len);
	return d == &dev0 ? copy_str(fake_uuid(), uuid, len) : NVML_ERROR_INVALID_ARGUMENT;
}

/* The device's memory: the V100's, or the MIG instance's; a container of a
 * MIG instance may not read its parent GPU's. used is the processes'; the
 * driver's reservation is apart from it (v1 counts it as used, v2 says it). */
static nvmlReturn_t memory(nvmlDevice_t d, unsigned long long *total, unsigned long long *used)
{
	int mig = fake_mig_uuid() != NULL;
	if (mig && d == &dev0)
		return NVML_ERROR_NO_PERMISSION;
	if (d != (mig ? &fake_mig0 : &dev0))
		return NVML_ERROR_INVALID_ARGUMENT;
	*total = fake_total_mem();
	*used = __atomic_load_n(&fake_shared()->mem_used, __ATOMIC_ACQUIRE);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	CHECK();
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned long long total, used;
	nvmlReturn_t r = memory(d, &total, &used);
	if (r != NVML_SUCCESS)
		return r;
	m->total = total;
	m->used = used + fake_reserved_mem();
	m->free = total - m->used;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
	CHECK();
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (m->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	unsigned long long total, used;
	nvmlReturn_t r = memory(d, &total, &used);
	if (r != NVML_SUCCESS)
		return r;
	m->total = total;
	m->reserved = fake_reserved_mem();
	m->used = used;
	m->free = total - m->reserved - used;
	return NVML_SUCCESS;
}

/* utilisation over the last 100 ms of the shared timeline */
API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	CHECK();
	if (d != &dev0 || !u)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (fake_mig_uuid())
		return NVML_ERROR_NOT_SUPPORTED; /* as on a GPU in MIG mode */
	u->gpu = fake_device_util(100000000ull);
	u->memory = 0;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
	CHECK();
	if (!v)
		return NVML_ERROR_INVALID_ARGUMENT;
	*v = 13000; /* what a 580 driver reports */
	return NVML_SUCCESS;
}
API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
	CHECK();
	if (!uuid || !d)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (fake_mig_uuid() && !strcmp(uuid, fake_mig_uuid())) {
		*d = &fake_mig0;
		return NVML_SUCCESS;
	}
	if (strcmp(uuid, fake_uuid()))
		return NVML_ERROR_NOT_FOUND;
	*d = &dev0;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
	CHECK();
	if (d != &dev0 || !major || !minor)
		return NVML_ERROR_INVALID_ARGUMENT;
	fake_compute_capability(major, minor);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t d, unsigned int *arch)
{
	CHECK();
	if (d != &dev0 || !arch)
		return NVML_ERROR_INVALID_ARGUMENT;
	int major, minor;
	fake_compute_capability(&major, &minor);
	*arch = major >= 9 ? 9 /* Hopper */ : major == 8 ? 7 /* Ampere */ : NVML_DEVICE_ARCH_VOLTA;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
	CHECK();
	if (d != &dev0 || !p)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(p, 0, sizeof *p);
	p->bus = 0x3b;
	p->pciDeviceId = 0x1DB610DE;
	snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:3B:00.0");
	snprintf(p->busId, sizeof p->busId, "00000000:3B:00.0");
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
	CHECK();
	if (d != &dev0 || !minor)
		return NVML_ERROR_INVALID_ARGUMENT;
	*minor = 0;
	return NVML_SUCCESS;
}

/* the live processes holding memory on the simulated GPU, as the driver lists them */
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos)
{
	CHECK();
	if (d != &dev0 || !count || (*count && !infos))
		return NVML_ERROR_INVALID_ARGUMENT;
	struct fake_proc ps[FAKE_PROCS];
	unsigned n = fake_processes(ps, FAKE_PROCS);
	if (n > *count) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++)
		infos[i] = (nvmlProcessInfo_t){.pid = ps[i].pid, .usedGpuMemory = ps[i].used,
					       .gpuInstanceId = 0xFFFFFFFFu, .computeInstanceId = 0xFFFFFFFFu};
	*count = n;
	return NVML_SUCCESS;
}
