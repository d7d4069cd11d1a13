/*
 * cuInit and contexts. Each context costs device memory of its own, charged
 * as GPUSLICE_CONTEXT_OVERHEAD, and destroying one frees every allocation
 * made in it.
 */
#define _GNU_SOURCE
#include <string.h>

#include "alloc.h"

GS_EXPORT CUresult cuInit(unsigned int flags)
{
	NEED_REAL(real, cuInit);
	if (gs_ensure() == GS_BROKEN)
		return CUDA_ERROR_NOT_INITIALIZED; /* the reason was logged once */
	return real(flags);
}

#define MAX_DEVICES 64
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static int prim_refs[MAX_DEVICES];
static CUcontext prim_ctx[MAX_DEVICES];

/* Credits what a destroyed context still held. */
static void context_gone(CUcontext ctx)
{
	uint64_t n1 = 0, n2 = 0;
	uint64_t b = gs_table_sweep(T_LINEAR, (uint64_t)(uintptr_t)ctx, 1u << GS_K_LINEAR, &n1);
	b += gs_table_sweep(T_ARRAY, (uint64_t)(uintptr_t)ctx, (1u << GS_K_ARRAY) | (1u << GS_K_MIPMAP), &n2);
	gs_credit(b);
	gs_note_live(-(int64_t)(n1 + n2));
	gs_pace_forget_context(ctx);
}

static int ctx_pre(void)
{
	gs_ensure(); /* the context charge is known once attached */
	return gs_charge_context(gs.cfg.ctx_overhead) ? -1 : 1;
}

static CUresult ctx_post(int pre, CUresult r, uint64_t key)
{
	if (pre != 1)
		return r;
	if (r != CUDA_SUCCESS) {
		gs_credit_context(gs.cfg.ctx_overhead);
		return r;
	}
	struct gs_entry e = {.key = key, .size = gs.cfg.ctx_overhead, .kind = GS_K_CTX};
	gs_table_put(T_CTX, &e);
	return r;
}

GS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate_v2);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags,
				  CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate_v3);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, params, n, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	NEED_REAL(real, cuCtxCreate_v4);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(pctx, params, flags, dev);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0);
}

GS_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
	NEED_REAL(real, cuGreenCtxCreate);
	int pre = ctx_pre();
	if (pre < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = real(phCtx, desc, dev, flags);
	return ctx_post(pre, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*phCtx : 0);
}

static CUresult ctx_destroy(CUresult r, void *ctx, bool green)
{
	if (r != CUDA_SUCCESS || gs_ensure() != GS_ENFORCE)
		return r;
	struct gs_entry e;
	if (gs_table_take(T_CTX, (uint64_t)(uintptr_t)ctx, &e))
		gs_credit_context(e.size);
	if (!green)
		context_gone((CUcontext)ctx);
	return r;
}

GS_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	NEED_REAL(real, cuCtxDestroy);
	return ctx_destroy(real(ctx), ctx, false);
}

GS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	NEED_REAL(real, cuCtxDestroy_v2);
	return ctx_destroy(real(ctx), ctx, false);
}

GS_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx ctx)
{
	NEED_REAL(real, cuGreenCtxDestroy);
	return ctx_destroy(real(ctx), ctx, true);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxRetain);
	if (dev < 0 || dev >= MAX_DEVICES)
		return real(pctx, dev);
	gs_ensure(); /* the context charge is known once attached */
	pthread_mutex_lock(&ctx_mu);
	bool first = prim_refs[dev] == 0;
	if (first && gs_charge_context(gs.cfg.ctx_overhead)) {
		pthread_mutex_unlock(&ctx_mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	CUresult r = real(pctx, dev);
	if (r != CUDA_SUCCESS) {
		if (first)
			gs_credit_context(gs.cfg.ctx_overhead);
	} else {
		prim_refs[dev]++;
		prim_ctx[dev] = *pctx;
	}
	pthread_mutex_unlock(&ctx_mu);
	return r;
}

static CUresult primary_release(CUresult (*real)(CUdevice), CUdevice dev)
{
	if (dev < 0 || dev >= MAX_DEVICES)
		return real(dev);
	pthread_mutex_lock(&ctx_mu);
	CUresult r = real(dev);
	if (r == CUDA_SUCCESS && prim_refs[dev] > 0 && --prim_refs[dev] == 0) {
		/* the driver destroys the primary context with its last reference */
		gs_credit_context(gs.cfg.ctx_overhead);
		context_gone(prim_ctx[dev]);
		prim_ctx[dev] = NULL;
	}
	pthread_mutex_unlock(&ctx_mu);
	return r;
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxRelease);
	return primary_release(real, dev);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxRelease_v2);
	return primary_release(real, dev);
}

static CUresult primary_reset(CUresult (*real)(CUdevice), CUdevice dev)
{
	if (dev < 0 || dev >= MAX_DEVICES)
		return real(dev);
	pthread_mutex_lock(&ctx_mu);
	CUresult r = real(dev);
	/* every allocation of the primary context is destroyed; the context
	 * itself stays retained and is charged until its last release */
	if (r == CUDA_SUCCESS && prim_ctx[dev])
		context_gone(prim_ctx[dev]);
	pthread_mutex_unlock(&ctx_mu);
	return r;
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxReset);
	return primary_reset(real, dev);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	NEED_REAL(real, cuDevicePrimaryCtxReset_v2);
	return primary_reset(real, dev);
}

void gs_contexts_after_fork(void)
{
	pthread_mutex_init(&ctx_mu, NULL);
	memset(prim_refs, 0, sizeof prim_refs);
	memset(prim_ctx, 0, sizeof prim_ctx);
}
