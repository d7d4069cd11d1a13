/*
 * gpuslice-smi: a tiny nvidia-smi. It reads what NVML reports, so inside a
 * gpuslice container it shows the slice (e.g. 8192MiB total), as the real
 * nvidia-smi does with the shim preloaded, and a MIG instance under its
 * GPU, as the real one does in a container given a MIG device.
 *
 *   gpuslice-smi          a table
 *   gpuslice-smi --csv    index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%]
 *   gpuslice-smi -L       the GPUs and their MIG devices with their UUIDs, as nvidia-smi -L
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../src/cuda_abi.h"

#define MiB (1024ull * 1024ull)

static void *h;
#define FN(var, type, name) static __typeof__(type) var
FN(init, nvmlReturn_t(*)(void), "nvmlInit_v2");
FN(count, nvmlReturn_t(*)(unsigned *), "nvmlDeviceGetCount_v2");
FN(handle, nvmlReturn_t(*)(unsigned, nvmlDevice_t *), "nvmlDeviceGetHandleByIndex_v2");
FN(name, nvmlReturn_t(*)(nvmlDevice_t, char *, unsigned), "nvmlDeviceGetName");
FN(uuid, nvmlReturn_t(*)(nvmlDevice_t, char *, unsigned), "nvmlDeviceGetUUID");
FN(mem, nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *), "nvmlDeviceGetMemoryInfo");
FN(mem2, nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_v2_t *), "nvmlDeviceGetMemoryInfo_v2");
FN(util, nvmlReturn_t(*)(nvmlDevice_t, nvmlUtilization_t *), "nvmlDeviceGetUtilizationRates");
FN(driver, nvmlReturn_t(*)(char *, unsigned), "nvmlSystemGetDriverVersion");
FN(mig_mode, nvmlReturn_t(*)(nvmlDevice_t, unsigned *, unsigned *), "nvmlDeviceGetMigMode");
FN(mig_max, nvmlReturn_t(*)(nvmlDevice_t, unsigned *), "nvmlDeviceGetMaxMigDeviceCount");
FN(mig_handle, nvmlReturn_t(*)(nvmlDevice_t, unsigned, nvmlDevice_t *), "nvmlDeviceGetMigDeviceHandleByIndex");

static void load(void)
{
#define SYM(var, name) var = (__typeof__(var))dlsym(h, name)
	SYM(init, "nvmlInit_v2");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(name, "nvmlDeviceGetName");
	SYM(uuid, "nvmlDeviceGetUUID");
	SYM(mem, "nvmlDeviceGetMemoryInfo");
	SYM(mem2, "nvmlDeviceGetMemoryInfo_v2");
	SYM(util, "nvmlDeviceGetUtilizationRates");
	SYM(driver, "nvmlSystemGetDriverVersion");
	SYM(mig_mode, "nvmlDeviceGetMigMode");
	SYM(mig_max, "nvmlDeviceGetMaxMigDeviceCount");
	SYM(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
}

/* memory of a device; 0 when NVML does not say (a MIG GPU's parent) */
static int memory(nvmlDevice_t d, unsigned long long *total, unsigned long long *used)
{
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
	nvmlMemory_t m1;
	if (mem2 && mem2(d, &m2) == NVML_SUCCESS) {
		*total = m2.total;
		*used = m2.used;
		return 1;
	}
	if (mem && mem(d, &m1) == NVML_SUCCESS) {
		*total = m1.total;
		*used = m1.used;
		return 1;
	}
	return 0;
}

/* the n-th MIG device of a GPU in MIG mode (visible ones only), or 0 */
static int mig_device(nvmlDevice_t d, unsigned n, nvmlDevice_t *out)
{
	unsigned cur = 0, pend = 0, max = 0, seen = 0;
	if (!mig_mode || !mig_max || !mig_handle || mig_mode(d, &cur, &pend) != NVML_SUCCESS || cur != 1 || mig_max(d, &max) != NVML_SUCCESS)
		return 0;
	for (unsigned i = 0; i < max; i++)
		if (mig_handle(d, i, out) == NVML_SUCCESS && seen++ == n)
			return 1;
	return 0;
}

/* "1g.5gb" of "NVIDIA A100-SXM4-40GB MIG 1g.5gb" */
static const char *profile_of(const char *mig_name)
{
	const char *p = strstr(mig_name, " MIG ");
	return p ? p + 5 : mig_name;
}

static void list(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		nvmlDevice_t d, m;
		char nm[96] = "?", id[96] = "?";
		if (handle(i, &d) != NVML_SUCCESS)
			continue;
		if (name)
			name(d, nm, sizeof nm);
		if (uuid)
			uuid(d, id, sizeof id);
		printf("GPU %u: %s (UUID: %s)\n", i, nm, id);
		for (unsigned j = 0; mig_device(d, j, &m); j++) {
			char mn[128] = "?", mid[96] = "?";
			if (name)
				name(m, mn, sizeof mn);
			if (uuid)
				uuid(m, mid, sizeof mid);
			printf("  MIG %-11s Device %2u: (UUID: %s)\n", profile_of(mn), j, mid);
		}
	}
}

static void row(int csv, const char *index, const char *nm, nvmlDevice_t d)
{
	unsigned long long total = 0, used = 0;
	int known = memory(d, &total, &used);
	nvmlUtilization_t u = {0, 0};
	int busy = util && util(d, &u) == NVML_SUCCESS;
	char pct[16] = "N/A";
	if (busy)
		snprintf(pct, sizeof pct, "%u%%", u.gpu);
	if (csv)
		printf("%s, %s, %llu, %llu, %u\n", index, nm, total / MiB, used / MiB, u.gpu);
	else if (known)
		printf("| %3s | %-31s | %8lluMiB / %6lluMiB | %11s |\n", index, nm, used / MiB, total / MiB, pct);
	else
		printf("| %3s | %-31s | %22s | %11s |\n", index, nm, "N/A", pct);
}

int main(int argc, char **argv)
{
	int csv = argc > 1 && !strcmp(argv[1], "--csv");
	int lst = argc > 1 && !strcmp(argv[1], "-L");
	h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "gpuslice-smi: cannot load libnvidia-ml.so.1: %s\n", dlerror());
		return 9;
	}
	load();
	if (!init || !count || !handle || !mem || init() != NVML_SUCCESS) {
		fprintf(stderr, "gpuslice-smi: NVML did not initialise\n");
		return 9;
	}
	unsigned n = 0;
	count(&n);
	if (lst) {
		list(n);
		return 0;
	}
	char ver[96] = "?";
	if (driver)
		driver(ver, sizeof ver);
	if (!csv) {
		printf("+------------------------------------------------------------------------------+\n");
		printf("| gpuslice-smi                                    Driver Version: %-12s |\n", ver);
		printf("|-----+---------------------------------+------------------------+-------------|\n");
		printf("| GPU | Name                            |           Memory-Usage |    GPU-Util |\n");
		printf("|=====+=================================+========================+=============|\n");
	}
	for (unsigned i = 0; i < n; i++) {
		nvmlDevice_t d, m;
		if (handle(i, &d) != NVML_SUCCESS)
			continue;
		char nm[96] = "?", index[16];
		if (name)
			name(d, nm, sizeof nm);
		snprintf(index, sizeof index, "%u", i);
		row(csv, index, nm, d);
		/* a MIG device as "GPU:MIG device", as nvidia-smi numbers them */
		for (unsigned j = 0; mig_device(d, j, &m); j++) {
			char mn[128] = "?";
			if (name)
				name(m, mn, sizeof mn);
			char short_name[128];
			snprintf(short_name, sizeof short_name, "MIG %s", profile_of(mn));
			snprintf(index, sizeof index, "%u:%u", i, j);
			row(csv, index, csv ? mn : short_name, m);
		}
	}
	if (!csv)
		printf("+-----+---------------------------------+------------------------+-------------+\n");
	return 0;
}
