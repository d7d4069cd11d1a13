/*
 * How calls reach the wrappers. A program finds a driver function in one of
 * three ways, and each must hand it the wrapper:
 *  - linked against libcuda / libnvidia-ml: the preloaded library's exported
 *    names come first in the lookup order;
 *  - dlopen + dlsym (the CUDA runtime, nvidia-smi, Go programs through cgo):
 *    dlsym is wrapped; when the address it finds lives in the driver library
 *    and names a wrapped function, the wrapper is returned instead;
 *  - cuGetProcAddress / cuGetProcAddress_v2 (how CUDA >= 11.3 runtimes find
 *    every entry point, asking for a base name and a CUDA version): the
 *    driver's answer is matched to the exact variant it returned (_v2, _v3,
 *    _ptsz, ...) by address, and that variant's wrapper is returned.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "shim_internal.h"

struct gs_sym gs_syms[GS_NSYMS] = {
#define GS_ROW(n, b, v, f) [GS_IDX_##n] = {.name = #n, .base = #b, .min_version = v, .flags = f, .wrapper = (void *)&n},
	GS_SYMBOLS(GS_ROW)
#undef GS_ROW
#define GS_IROW(n, b, v, f) [GS_IDX_##n] = {.name = #n, .base = #b, .min_version = v, .flags = f, .wrapper = NULL},
	GS_INTERNAL_SYMBOLS(GS_IROW)
#undef GS_IROW
};

typedef void *(*dlsym_fn)(void *, const char *);
static void *wrapped_dlsym(void *handle, const char *name);
static dlsym_fn real_dlsym_p;

static dlsym_fn real_dlsym(void)
{
	dlsym_fn f = __atomic_load_n(&real_dlsym_p, __ATOMIC_ACQUIRE);
	if (GS_LIKELY(f))
		return f;
	/* libc's dlsym, whatever symbol version this glibc gives it */
	static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
	for (size_t i = 0; i < sizeof versions / sizeof *versions && !f; i++)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (!f) {
		gs_log("cannot find the C library's dlsym; aborting");
		abort();
	}
	__atomic_store_n(&real_dlsym_p, f, __ATOMIC_RELEASE);
	return f;
}

static const char *lib_soname(int flags)
{
	return (flags & GS_SYM_IN_LIBCUDA) ? "libcuda.so.1" : "libnvidia-ml.so.1";
}

/* Is addr inside the driver library this symbol belongs to? */
static bool in_driver_lib(void *addr, int flags)
{
	Dl_info di;
	if (!addr || !dladdr(addr, &di) || !di.dli_fname)
		return false;
	const char *base = strrchr(di.dli_fname, '/');
	base = base ? base + 1 : di.dli_fname;
	const char *want = (flags & GS_SYM_IN_LIBCUDA) ? "libcuda.so" : "libnvidia-ml.so";
	return strncmp(base, want, strlen(want)) == 0;
}

static void *driver_handle(int flags)
{
	void *h = dlopen(lib_soname(flags), RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen(lib_soname(flags), RTLD_LAZY);
	return h;
}

static void set_real(int idx, void *p)
{
	void *expected = NULL;
	__atomic_compare_exchange_n(&gs_syms[idx].real, &expected, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void *gs_resolve(int idx)
{
	struct gs_sym *s = &gs_syms[idx];
	void *p = real_dlsym()(RTLD_NEXT, s->name);
	if (p && !in_driver_lib(p, s->flags))
		p = NULL;
	if (!p) {
		void *h = driver_handle(s->flags);
		if (h)
			p = real_dlsym()(h, s->name);
	}
	if (p)
		set_real(idx, p);
	return __atomic_load_n(&s->real, __ATOMIC_ACQUIRE);
}

/* Wrapped names, sorted, for dlsym's lookup. */
static int sorted[GS_NSYMS];
static int nsorted;
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int cmp_idx(const void *a, const void *b)
{
	return strcmp(gs_syms[*(const int *)a].name, gs_syms[*(const int *)b].name);
}

static void build_sorted(void)
{
	for (int i = 0; i < GS_NSYMS; i++)
		if (gs_syms[i].wrapper)
			sorted[nsorted++] = i;
	qsort(sorted, (size_t)nsorted, sizeof *sorted, cmp_idx);
}

static int find_wrapped(const char *name)
{
	pthread_once(&sorted_once, build_sorted);
	int lo = 0, hi = nsorted - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(name, gs_syms[sorted[mid]].name);
		if (!c)
			return sorted[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

/* RTLD_NEXT means "after the caller": libc finds the caller from its return
 * address, so that call must be a tail call (a jump), which keeps the
 * caller's return address; the attribute keeps it one whatever CFLAGS say. */
__attribute__((optimize("O2", "optimize-sibling-calls"))) static void *next_dlsym(void *handle, const char *name)
{
	return real_dlsym()(handle, name);
}

GS_EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlsym(void *handle, const char *name)
{
	if (handle == RTLD_NEXT)
		return next_dlsym(handle, name);
	return wrapped_dlsym(handle, name);
}

static void *wrapped_dlsym(void *handle, const char *name)
{
	void *r = real_dlsym()(handle, name);
	if (!r || (name[0] != 'c' && name[0] != 'n'))
		return r;
	int idx = find_wrapped(name);
	if (idx < 0 || r == gs_syms[idx].wrapper || !in_driver_lib(r, gs_syms[idx].flags))
		return r;
	set_real(idx, r);
	return gs_syms[idx].wrapper;
}

/* The newest CUDA version whose variants of the wrapped functions the
 * table in shim_internal.h lists (checked against CUDA 12.9's headers). */
#define GS_KNOWN_CUDA_VERSION 12090

/* Maps the driver's answer for `symbol` to our wrapper of the same variant. */
static void *wrap_proc(const char *symbol, void *realfn, int version, cuuint64_t flags, bool *refuse)
{
	*refuse = false;
	int cand[8], nc = 0;
	int account = 0;
	for (int i = 0; i < GS_NSYMS && nc < 8; i++)
		if (gs_syms[i].wrapper && (gs_syms[i].flags & GS_SYM_IN_LIBCUDA) && !strcmp(gs_syms[i].base, symbol)) {
			cand[nc++] = i;
			account |= gs_syms[i].flags & GS_SYM_ACCOUNTED;
		}
	if (!nc)
		return realfn;
	/* 1: the variant whose exported address the driver returned */
	void *h = driver_handle(GS_SYM_IN_LIBCUDA);
	for (int k = 0; k < nc && h; k++) {
		void *p = real_dlsym()(h, gs_syms[cand[k]].name);
		if (p == realfn) {
			set_real(cand[k], realfn);
			return gs_syms[cand[k]].wrapper;
		}
	}
	/* 2: the variant's name, if the address is exactly a symbol we know */
	Dl_info di;
	if (dladdr(realfn, &di) && di.dli_sname && di.dli_saddr == realfn)
		for (int k = 0; k < nc; k++)
			if (!strcmp(di.dli_sname, gs_syms[cand[k]].name)) {
				set_real(cand[k], realfn);
				return gs_syms[cand[k]].wrapper;
			}
	/* 3: an unexported address: the newest variant this CUDA version had,
	 * but only for versions whose variants this table is known to list (a
	 * later version may have a variant with another signature) */
	bool ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	int best = -1;
	for (int k = 0; k < nc; k++) {
		struct gs_sym *s = &gs_syms[cand[k]];
		bool s_ptsz = (s->flags & GS_SYM_PER_THREAD_STREAM) != 0;
		if (version > GS_KNOWN_CUDA_VERSION || s->min_version > version || s_ptsz != ptsz)
			continue;
		if (best < 0 || s->min_version > gs_syms[best].min_version)
			best = cand[k];
	}
	if (best >= 0) {
		gs_debug("cuGetProcAddress(%s, %d): unexported address, taken as %s", symbol, version,
			 gs_syms[best].name);
		/* the wrapper calls the exported function of that variant if the
		 * driver has one, else this address */
		set_real(best, realfn);
		return gs_syms[best].wrapper;
	}
	if (account) {
		/* handing out an unwrapped allocator would bypass the budget */
		gs_log("cuGetProcAddress(%s, %d): the driver returned a variant this library does not know; "
		       "refusing it rather than letting allocations bypass the memory limit",
		       symbol, version);
		*refuse = true;
		return NULL;
	}
	return realfn;
}

GS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				       CUdriverProcAddressQueryResult *symbolStatus)
{
	CUresult (*real)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
		REAL(cuGetProcAddress_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS && pfn && *pfn && symbol) {
		bool refuse;
		*pfn = wrap_proc(symbol, *pfn, cudaVersion, flags, &refuse);
		if (refuse) {
			if (symbolStatus)
				*symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
			return CUDA_ERROR_NOT_FOUND;
		}
	}
	return r;
}

GS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	CUresult (*real)(const char *, void **, int, cuuint64_t) = REAL(cuGetProcAddress);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = real(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS && pfn && *pfn && symbol) {
		bool refuse;
		*pfn = wrap_proc(symbol, *pfn, cudaVersion, flags, &refuse);
		if (refuse)
			return CUDA_ERROR_NOT_FOUND;
	}
	return r;
}
