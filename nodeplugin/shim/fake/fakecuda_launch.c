/*
 * The fake driver's modules, kernel launches and graphs. A kernel runs for
 * as long as its first parameter says (a uint64_t of nanoseconds); a graph
 * for the sum of its kernels.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

API CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
	(void)image;
	*m = (CUmodule)calloc(1, 8);
	return CUDA_SUCCESS;
}

API CUresult cuModuleUnload(CUmodule m)
{
	free(m);
	return CUDA_SUCCESS;
}

API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	if (!m || !name)
		return CUDA_ERROR_INVALID_VALUE;
	struct function *fn = calloc(1, sizeof *fn);
	strncpy(fn->name, name, sizeof fn->name - 1);
	*f = (CUfunction)fn;
	return CUDA_SUCCESS;
}

static uint64_t duration_of(void **params) { return params && params[0] ? *(uint64_t *)params[0] : 0; }

static CUresult launch(CUfunction f, CUstream s, bool ptsz, void **params)
{
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	timeline_push(stream_of(s, ptsz), duration_of(params));
	return CUDA_SUCCESS;
}

API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			    unsigned shmem, CUstream s, void **params, void **extra)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)extra;
	return launch(f, s, false, params);
}
API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				 unsigned bz, unsigned shmem, CUstream s, void **params, void **extra)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)extra;
	return launch(f, s, true, params);
}
API CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	(void)extra;
	return c ? launch(f, c->hStream, false, params) : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	(void)extra;
	return c ? launch(f, c->hStream, true, params) : CUDA_ERROR_INVALID_VALUE;
}
API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				       unsigned bz, unsigned shmem, CUstream s, void **params)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
	return launch(f, s, false, params);
}
API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
					    unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
	return launch(f, s, true, params);
}

API CUresult cuGraphCreate(CUgraph *g, unsigned int flags)
{
	(void)flags;
	*g = (CUgraph)calloc(1, sizeof(struct graph));
	return CUDA_SUCCESS;
}

API CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
				  const CUDA_KERNEL_NODE_PARAMS *p)
{
	(void)deps, (void)ndeps;
	if (!g || !p)
		return CUDA_ERROR_INVALID_VALUE;
	((struct graph *)g)->duration += duration_of(p->kernelParams);
	*node = (CUgraphNode)g;
	return CUDA_SUCCESS;
}

API CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
	(void)flags;
	struct graph *x = calloc(1, sizeof *x);
	*x = *(struct graph *)g;
	*e = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec e, CUstream s, bool ptsz)
{
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	timeline_push(stream_of(s, ptsz), ((struct graph *)e)->duration);
	return CUDA_SUCCESS;
}
API CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { return graph_launch(e, s, false); }
API CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) { return graph_launch(e, s, true); }
API CUresult cuGraphExecDestroy(CUgraphExec e)
{
	free(e);
	return CUDA_SUCCESS;
}
API CUresult cuGraphDestroy(CUgraph g)
{
	free(g);
	return CUDA_SUCCESS;
}
