/*
 * slice-check: what a CUDA program sees of its GPU slice. It uses the CUDA
 * driver API as real workloads do (libcuda.so.1 found with dlopen, like the
 * CUDA runtime): the device's memory as cuMemGetInfo reports it,
 * allocations up to the slice and one past it, and timed kernel launches
 * (a PTX kernel that spins for a given number of nanoseconds, so the same
 * program measures a real GPU and the simulated one).
 *
 *   slice-check                 report, then exit (0: the slice held)
 *   slice-check --hold MIB      allocate MIB and keep it until killed
 *   slice-check --hold MIB --marker FILE   …and create FILE once it holds
 *   slice-check --sleep         report, then sleep until killed
 *   slice-check --devices ...   first list the GPU device nodes the container has
 *                               (nvidia* in /dev and /dev/nvidia-caps) with their numbers
 *   slice-check --libcuda PATH ...  load the driver from PATH instead of libcuda.so.1
 *                               (a tenant's copy of the driver library, for the red-team suite)
 *
 * Every line starts with "slice-check:"; tests and the demo read them.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define MiB (1024ull * 1024ull)
#define CHUNK (256ull * MiB)
#define MAX_CHUNKS 4096

static const char spin_ptx[] = ".version 6.0\n"
			       ".target sm_50\n"
			       ".address_size 64\n"
			       ".visible .entry spin(.param .u64 ns)\n"
			       "{\n"
			       "  .reg .u64 %rd<5>;\n"
			       "  .reg .pred %p;\n"
			       "  ld.param.u64 %rd1, [ns];\n"
			       "  mov.u64 %rd2, %globaltimer;\n"
			       "LOOP:\n"
			       "  mov.u64 %rd3, %globaltimer;\n"
			       "  sub.u64 %rd4, %rd3, %rd2;\n"
			       "  setp.lt.u64 %p, %rd4, %rd1;\n"
			       "  @%p bra LOOP;\n"
			       "  ret;\n"
			       "}\n";

static struct {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*device_name)(char *, int, CUdevice);
	CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice);
	CUresult (*mem_get_info)(size_t *, size_t *);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*module_load)(CUmodule *, const void *);
	CUresult (*module_function)(CUfunction *, CUmodule, const char *);
	CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
			   void **, void **);
	CUresult (*synchronize)(void);
	CUresult (*error_name)(CUresult, const char **);
} cu;

static const char *name_of(CUresult r)
{
	const char *s = NULL;
	if (cu.error_name && cu.error_name(r, &s) == 0 && s)
		return s;
	/* a driver without cuGetErrorName: the codes this program meets */
	switch (r) {
	case 1: return "CUDA_ERROR_INVALID_VALUE";
	case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
	case 3: return "CUDA_ERROR_NOT_INITIALIZED";
	case 100: return "CUDA_ERROR_NO_DEVICE";
	case 201: return "CUDA_ERROR_INVALID_CONTEXT";
	}
	static char buf[32];
	snprintf(buf, sizeof buf, "CUresult %d", r);
	return buf;
}

static void die(const char *what, CUresult r)
{
	printf("slice-check: %s failed: %s\n", what, name_of(r));
	exit(3);
}

static void load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("slice-check: cannot load %s: %s\n", lib, dlerror());
		exit(3);
	}
#define SYM(field, name)                                                    \
	do {                                                                \
		*(void **)&cu.field = dlsym(h, name);                       \
		if (!cu.field) {                                            \
			printf("slice-check: libcuda.so.1 lacks %s\n", name); \
			exit(3);                                            \
		}                                                           \
	} while (0)
	SYM(init, "cuInit");
	SYM(device_get, "cuDeviceGet");
	SYM(device_name, "cuDeviceGetName");
	SYM(ctx_create, "cuCtxCreate_v2");
	SYM(mem_get_info, "cuMemGetInfo_v2");
	SYM(mem_alloc, "cuMemAlloc_v2");
	SYM(mem_free, "cuMemFree_v2");
	SYM(module_load, "cuModuleLoadData");
	SYM(module_function, "cuModuleGetFunction");
	SYM(launch, "cuLaunchKernel");
	SYM(synchronize, "cuCtxSynchronize");
	*(void **)&cu.error_name = dlsym(h, "cuGetErrorName");
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_term(int sig)
{
	(void)sig;
	_exit(0);
}

/* sleep_forever waits for the end (main's handlers end it). */
static void sleep_forever(void)
{
	fflush(stdout);
	for (;;)
		pause();
}

/* allocate_until_refused allocates CHUNKs until the driver refuses one. */
static int allocate_until_refused(size_t total)
{
	static CUdeviceptr chunks[MAX_CHUNKS];
	int n = 0;
	CUresult r = 0;
	while (n < MAX_CHUNKS && (r = cu.mem_alloc(&chunks[n], CHUNK)) == 0)
		n++;
	unsigned long long got = (unsigned long long)n * CHUNK / MiB;
	printf("slice-check: allocated %llu MiB in %d blocks of %llu MiB; the next block: %s\n", got, n, CHUNK / MiB,
	       r ? name_of(r) : "(not tried: block limit)");
	int held = r == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ && (unsigned long long)n * CHUNK <= total;
	for (int i = 0; i < n; i++)
		cu.mem_free(chunks[i]);
	return held;
}

/* launch_kernels launches count kernels of busy_ns each and reports the
 * share of wall-clock time they got. */
static void launch_kernels(int count, uint64_t busy_ns)
{
	CUmodule mod;
	CUfunction fn;
	CUresult r = cu.module_load(&mod, spin_ptx);
	if (r)
		die("cuModuleLoadData", r);
	if ((r = cu.module_function(&fn, mod, "spin")))
		die("cuModuleGetFunction", r);
	uint64_t start = now_ns();
	for (int i = 0; i < count; i++) {
		void *params[] = {&busy_ns};
		if ((r = cu.launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL)))
			die("cuLaunchKernel", r);
	}
	if ((r = cu.synchronize()))
		die("cuCtxSynchronize", r);
	uint64_t wall = now_ns() - start;
	printf("slice-check: %d kernels of %llu ms ran in %llu ms: %llu %% of the GPU's time\n", count,
	       (unsigned long long)(busy_ns / 1000000), (unsigned long long)(wall / 1000000),
	       (unsigned long long)(100ull * count * busy_ns / (wall ? wall : 1)));
}

/* the NVIDIA character devices in dir: what the runtime gave the container */
static void list_devices(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[512];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (!strncmp(e->d_name, "nvidia", 6) && stat(path, &st) == 0 && S_ISCHR(st.st_mode))
			printf("slice-check: device node %s c %u:%u\n", path, major(st.st_rdev), minor(st.st_rdev));
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* As a container's PID 1 it must exit on SIGTERM itself (PID 1 has no
	 * default signal actions), from the first instruction: a pod deleted
	 * while the driver still starts would otherwise wait out its grace
	 * period. */
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	unsigned long long hold = 0;
	int then_sleep = 0;
	const char *marker = NULL, *lib = "libcuda.so.1";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--marker") && i + 1 < argc)
			marker = argv[++i];
		else if (!strcmp(argv[i], "--libcuda") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--sleep"))
			then_sleep = 1;
		else if (!strcmp(argv[i], "--devices")) {
			list_devices("/dev");
			list_devices("/dev/nvidia-caps");
		} else {
			fprintf(stderr, "usage: slice-check [--devices] [--libcuda PATH] [--hold MIB [--marker FILE]] [--sleep]\n");
			return 64;
		}
	}
	load(lib);
	CUresult r;
	CUdevice dev;
	CUcontext ctx;
	char name[128] = "?";
	if ((r = cu.init(0)))
		die("cuInit", r);
	if ((r = cu.device_get(&dev, 0)))
		die("cuDeviceGet", r);
	cu.device_name(name, sizeof name, dev);
	if ((r = cu.ctx_create(&ctx, 0, dev)))
		die("cuCtxCreate", r);
	size_t free_b = 0, total_b = 0;
	if ((r = cu.mem_get_info(&free_b, &total_b)))
		die("cuMemGetInfo", r);
	printf("slice-check: device 0: %s, %llu MiB total, %llu MiB free\n", name, (unsigned long long)(total_b / MiB),
	       (unsigned long long)(free_b / MiB));
	if (hold) {
		CUdeviceptr p;
		if ((r = cu.mem_alloc(&p, hold * MiB)))
			die("holding allocation", r);
		printf("slice-check: holding %llu MiB\n", hold);
		if (marker) {
			FILE *f = fopen(marker, "w");
			if (!f || fclose(f)) {
				printf("slice-check: cannot create %s\n", marker);
				return 3;
			}
		}
		sleep_forever();
	}
	int held = allocate_until_refused(total_b);
	launch_kernels(20, 50ull * 1000000ull);
	printf("slice-check: %s\n", held ? "the slice held: allocations past it were refused"
					 : "THE SLICE DID NOT HOLD: an allocation past it succeeded or failed otherwise");
	if (then_sleep)
		sleep_forever();
	return held ? 0 : 2;
}
