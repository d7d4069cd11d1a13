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
 * enforcer reads. On a simulated node every container of a GPU shares its
 * state file, in many PID namespaces, so a process is recorded as its PID
 * namespace (the inode of /proc/self/ns/pid) and its PID there, with its
 * start time; the node plugin's simulated NVML (nodeplugin/simulate), in the
 * host's PID namespace, finds its host PID from those and reads and reaps
 * the table through the fixed layout below. A process that dies keeps its
 * memory in mem_used (the fake frees nothing by itself) until the plugin
 * finds it gone and frees it, as a real driver frees a dead process's
 * memory; it drops out of the fake's own list at once.
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
#define FAKE_MAGIC 0x32555047454b4146ull /* "FAKEGPU2": the layout below */

struct fake_interval {
	uint64_t start, end;
};

enum { FAKE_PROC_FREE = 0, FAKE_PROC_BUSY = 1, FAKE_PROC_LIVE = 2 };

/* One process's memory. state moves FREE -> BUSY (the claimer fills the
 * entry) -> LIVE, and LIVE -> BUSY (a reaper frees `used` from mem_used and
 * clears the entry) -> FREE, each by compare-and-swap, so the C fake and
 * the Go plugin never write one entry at once. */
struct fake_proc {
	uint32_t state;    /*  0 FAKE_PROC_* (atomic) */
	uint32_t pid;      /*  4 in its PID namespace */
	uint32_t pidns;    /*  8 inode of its /proc/<pid>/ns/pid; 0: unknown */
	uint32_t reserved; /* 12 */
	uint64_t start;    /* 16 start time, clock ticks after boot (/proc/<pid>/stat field 22) */
	uint64_t used;     /* 24 device memory it holds (atomic) */
};

struct fake_shared {
	/* fixed layout, also read and written by nodeplugin/simulate */
	uint64_t magic;                     /*  0 FAKE_MAGIC, written last */
	uint64_t mem_used;                  /*  8 atomic */
	uint64_t mem_high;                  /* 16 atomic */
	uint64_t reserved[5];               /* 24 */
	struct fake_proc procs[FAKE_PROCS]; /* 64 */
	/* the fake's own */
	pthread_mutex_t mu; /* robust, process-shared: guards the timeline */
	uint64_t gpu_free_at;
	uint64_t ring_n; /* intervals ever pushed */
	struct fake_interval ring[FAKE_RING];
};

#define FAKE_OFF_MEM_USED 8
#define FAKE_OFF_PROCS 64
#define FAKE_PROC_SIZE 32
_Static_assert(offsetof(struct fake_shared, mem_used) == FAKE_OFF_MEM_USED, "mem_used");
_Static_assert(offsetof(struct fake_shared, procs) == FAKE_OFF_PROCS, "procs");
_Static_assert(sizeof(struct fake_proc) == FAKE_PROC_SIZE, "proc size");

struct fake_shared *fake_shared(void);
void fake_lock(struct fake_shared *s);
void fake_unlock(struct fake_shared *s);
uint64_t fake_now(void); /* CLOCK_MONOTONIC ns */
void fake_sleep_until(uint64_t t);
int fake_mem_reserve(uint64_t n); /* 0 or -1 when the device is full */
void fake_mem_release(uint64_t n);
unsigned fake_device_util(uint64_t period_ns); /* percent busy over the last period */
/* the live processes of this PID namespace holding device memory: fills up
 * to max, returns how many there are */
unsigned fake_processes(struct fake_proc *out, unsigned max);

/* the simulated device (fakedevice.c): the V100 above, or the MIG instance
 * the environment names */
const char *fake_mig_uuid(void); /* NULL: not a MIG instance */
const char *fake_mig_profile(void);
const char *fake_name(void); /* the GPU's (a MIG instance's parent's) */
const char *fake_uuid(void);
uint64_t fake_total_mem(void); /* the GPU's, or the MIG instance's */
/* what the driver keeps of it for itself (FAKEGPU_RESERVED_BYTES; none on a
 * MIG instance), as NVML's v2 memory info reports it: no allocation gets it,
 * and CUDA counts only the rest */
uint64_t fake_reserved_mem(void);
uint64_t fake_usable_mem(void); /* total less reserved */
void fake_compute_capability(int *major, int *minor);
void fake_device_name(char *out, size_t len); /* as CUDA names the device */

#endif
