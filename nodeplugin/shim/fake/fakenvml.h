/*
 * What the parts of the fake libnvidia-ml.so.1 share: its device handles
 * (the GPU and, in a MIG claim's container, its one MIG instance) and the
 * initialisation check.
 */
#ifndef FAKENVML_H
#define FAKENVML_H

#include "../src/cuda_abi.h"
#include "fakegpu.h"

#define API __attribute__((visibility("default")))

struct nvmlDevice_st {
	int mig;
};
extern struct nvmlDevice_st fake_gpu0, fake_mig0;

int fake_nvml_inited(void);

#define CHECK()                                       \
	do {                                          \
		if (!fake_nvml_inited())              \
			return NVML_ERROR_UNINITIALIZED; \
	} while (0)

#endif
