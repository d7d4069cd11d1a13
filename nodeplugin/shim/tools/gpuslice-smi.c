/*
 * gpuslice-smi: a tiny nvidia-smi. It reads what NVML reports, so inside a
 * gpuslice container it shows the slice (e.g. 8192MiB total), as the real
 * nvidia-smi does with the shim preloaded.
 *
 *   gpuslice-smi          a table
 *   gpuslice-smi --csv    index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../src/cuda_abi.h"

#define MiB (1024ull * 1024ull)

int main(int argc, char **argv)
{
	int csv = argc > 1 && !strcmp(argv[1], "--csv");
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "gpuslice-smi: cannot load libnvidia-ml.so.1: %s\n", dlerror());
		return 9;
	}
#define FN(var, type, name) __typeof__(type) var = (__typeof__(type))dlsym(h, name)
	FN(init, nvmlReturn_t(*)(void), "nvmlInit_v2");
	FN(count, nvmlReturn_t(*)(unsigned *), "nvmlDeviceGetCount_v2");
	FN(handle, nvmlReturn_t(*)(unsigned, nvmlDevice_t *), "nvmlDeviceGetHandleByIndex_v2");
	FN(name, nvmlReturn_t(*)(nvmlDevice_t, char *, unsigned), "nvmlDeviceGetName");
	FN(mem, nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *), "nvmlDeviceGetMemoryInfo");
	FN(mem2, nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_v2_t *), "nvmlDeviceGetMemoryInfo_v2");
	FN(util, nvmlReturn_t(*)(nvmlDevice_t, nvmlUtilization_t *), "nvmlDeviceGetUtilizationRates");
	FN(driver, nvmlReturn_t(*)(char *, unsigned), "nvmlSystemGetDriverVersion");
	if (!init || !count || !handle || !mem || init() != NVML_SUCCESS) {
		fprintf(stderr, "gpuslice-smi: NVML did not initialise\n");
		return 9;
	}
	unsigned n = 0;
	count(&n);
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
		nvmlDevice_t d;
		if (handle(i, &d) != NVML_SUCCESS)
			continue;
		char nm[96] = "?";
		if (name)
			name(d, nm, sizeof nm);
		unsigned long long total = 0, used = 0;
		nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
		nvmlMemory_t m1;
		if (mem2 && mem2(d, &m2) == NVML_SUCCESS) {
			total = m2.total;
			used = m2.used;
		} else if (mem(d, &m1) == NVML_SUCCESS) {
			total = m1.total;
			used = m1.used;
		}
		nvmlUtilization_t u = {0, 0};
		if (util)
			util(d, &u);
		if (csv)
			printf("%u, %s, %llu, %llu, %u\n", i, nm, total / MiB, used / MiB, u.gpu);
		else
			printf("| %3u | %-31s | %8lluMiB / %6lluMiB | %10u%% |\n", i, nm, used / MiB, total / MiB, u.gpu);
	}
	if (!csv)
		printf("+-----+---------------------------------+------------------------+-------------+\n");
	return 0;
}
