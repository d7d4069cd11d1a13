/*
 * State of the simulated GPU (a 32 GiB Tesla V100) that the test-only
 * libcuda.so.1 and libnvidia-ml.so.1 share between all processes of a test:
 * device memory in use and the execution timeline. It lives in the file named
 * by FAKEGPU_STATE (or, without it, in memory shared with forked children).
 *
 * Execution model: the GPU runs one kernel at a time, in the order kernels
 * are launched by any process (a kernel starts when the GPU is free and ends
 * its duration later). Events are timestamped when the GPU reaches them in
 * that order. So a process's utilisation is the time its own kernels occupy
 * on that one timeline, and two events around a kernel measure exactly it.
 *
 * Memory is also counted per process, for NVML's list of the processes using
 * the GPU (nvmlDeviceGetComputeRunningProcesses): what the node plugin's
 * bypass detection reads. A process that dies keeps its memory in mem_used
 * (the fake frees nothing by itself) but drops out of that list.
 */
#ifndef FAKEGPU_H
#define FAKEGPU_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_TOTAL_MEM (32ull << 30)
#define FAKE_NAME "Tesla V100-PCIE-32GB"
#define FAKE_UUID "GPU-5f0c0dd8-6c5e-4c0e-9b6e-0000000000a1"
#define FAKE_RING 8192
#define FAKE_PROCS 256
#define FAKE_MAGIC 0x55504745414b4146ull

struct fake_interval {
	uint64_t start, end;
};

struct fake_proc {
	uint32_t pid; /* 0: free */
	uint32_t pad;
	uint64_t used; /* atomic */
};

struct fake_shared {
	uint64_t magic;
	pthread_mutex_t mu; /* robust, process-shared: guards the timeline */
	uint64_t gpu_free_at;
	uint64_t mem_used;  /* atomic */
	uint64_t mem_high;  /* atomic */
	uint64_t ring_n;    /* intervals ever pushed */
	struct fake_interval ring[FAKE_RING];
	struct fake_proc procs[FAKE_PROCS]; /* under mu */
};

struct fake_shared *fake_shared(void);
void fake_lock(struct fake_shared *s);
void fake_unlock(struct fake_shared *s);
uint64_t fake_now(void); /* CLOCK_MONOTONIC ns */
void fake_sleep_until(uint64_t t);
int fake_mem_reserve(uint64_t n); /* 0 or -1 when the device is full */
void fake_mem_release(uint64_t n);
unsigned fake_device_util(uint64_t period_ns); /* percent busy over the last period */
/* the live processes holding device memory: fills up to max, returns how many there are */
unsigned fake_processes(struct fake_proc *out, unsigned max);

/* the simulated device (fakedevice.c): the V100 above, or the MIG instance
 * the environment names */
const char *fake_mig_uuid(void); /* NULL: not a MIG instance */
const char *fake_mig_profile(void);
const char *fake_name(void); /* the GPU's (a MIG instance's parent's) */
const char *fake_uuid(void);
uint64_t fake_total_mem(void); /* the GPU's, or the MIG instance's */
void fake_compute_capability(int *major, int *minor);
void fake_device_name(char *out, size_t len); /* as CUDA names the device */

#endif
