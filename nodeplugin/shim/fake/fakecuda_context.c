/*
 * The fake driver's contexts: each costs FAKEGPU_CONTEXT_BYTES of device
 * memory, and destroying one frees its allocations (pool allocations stay
 * with their pool).
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fakecuda.h"

static CUresult ctx_new(CUcontext *pctx, int dev)
{
	CHECK_INIT();
	if (dev != 0 || !pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_mem_reserve(F.ctx_bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct ctx *c = calloc(1, sizeof *c);
	c->alive = true;
	c->dev = dev;
	*pctx = (CUcontext)c;
	current = c;
	return CUDA_SUCCESS;
}

API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_new(pctx, dev);
}
API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_new(pctx, dev);
}
API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice dev)
{
	(void)p, (void)n, (void)flags;
	return ctx_new(pctx, dev);
}
API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev)
{
	(void)p, (void)flags;
	return ctx_new(pctx, dev);
}

/* F.mu held: frees what a context's destruction frees */
static void free_ctx_allocs(struct ctx *c)
{
	for (size_t i = 0; i < F.cap;) {
		if (F.tab[i].key && F.tab[i].ctx == c && F.tab[i].kind != FAKE_POOL) {
			struct alloc a;
			uint64_t key = F.tab[i].key;
			tab_take(key, &a);
			fake_mem_release(a.size);
			continue; /* the cluster was rebuilt: look at i again */
		}
		i++;
	}
}

static CUresult ctx_destroy(CUcontext ctx)
{
	struct ctx *c = (struct ctx *)ctx;
	if (!c || c->primary || !c->alive)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&F.mu);
	free_ctx_allocs(c);
	pthread_mutex_unlock(&F.mu);
	c->alive = false;
	fake_mem_release(F.ctx_bytes);
	if (current == c)
		current = NULL;
	return CUDA_SUCCESS;
}

API CUresult cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }
API CUresult cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }

API CUresult cuGreenCtxCreate(CUgreenCtx *p, CUdevResourceDesc d, CUdevice dev, unsigned int flags)
{
	(void)d, (void)flags;
	CUcontext save = (CUcontext)current;
	CUresult r = ctx_new((CUcontext *)p, dev);
	current = (struct ctx *)save; /* green contexts are not made current */
	return r;
}
API CUresult cuGreenCtxDestroy(CUgreenCtx g) { return ctx_destroy((CUcontext)g); }

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0 || !pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&F.mu);
	if (F.primary.refs == 0) {
		if (fake_mem_reserve(F.ctx_bytes)) {
			pthread_mutex_unlock(&F.mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		F.primary.alive = true;
	}
	F.primary.refs++;
	pthread_mutex_unlock(&F.mu);
	*pctx = (CUcontext)&F.primary;
	return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&F.mu);
	if (F.primary.refs == 0) {
		pthread_mutex_unlock(&F.mu);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (--F.primary.refs == 0) {
		free_ctx_allocs(&F.primary);
		F.primary.alive = false;
		fake_mem_release(F.ctx_bytes);
	}
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}
API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_release(dev); }
API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_release(dev); }

static CUresult primary_reset(CUdevice dev)
{
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&F.mu);
	free_ctx_allocs(&F.primary);
	pthread_mutex_unlock(&F.mu);
	return CUDA_SUCCESS;
}
API CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return primary_reset(dev); }
API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_reset(dev); }

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	current = (struct ctx *)ctx;
	return CUDA_SUCCESS;
}
API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	*pctx = (CUcontext)current;
	return CUDA_SUCCESS;
}
API CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return cuCtxSetCurrent(ctx); }
API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	if (pctx)
		*pctx = (CUcontext)current;
	current = NULL;
	return CUDA_SUCCESS;
}
API CUresult cuCtxGetDevice(CUdevice *dev)
{
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = 0;
	return CUDA_SUCCESS;
}
