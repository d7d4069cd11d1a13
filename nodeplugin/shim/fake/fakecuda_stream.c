/*
 * The fake driver's streams, events and the timeline they sit on (see
 * fakegpu.h: one kernel at a time, across every process), and what the
 * simulated GPU saw, for the tests.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fakecuda.h"

struct stream *stream_of(CUstream s, bool ptsz)
{
	if (s == CU_STREAM_PER_THREAD || (ptsz && !s))
		return &per_thread;
	if (!s || s == CU_STREAM_LEGACY)
		return &F.legacy;
	return (struct stream *)s;
}

API CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	(void)flags;
	*s = (CUstream)calloc(1, sizeof(struct stream));
	return CUDA_SUCCESS;
}

API CUresult cuStreamDestroy_v2(CUstream s)
{
	free(s);
	return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream s, bool ptsz)
{
	fake_sleep_until(stream_of(s, ptsz)->tail);
	sync_pools();
	return CUDA_SUCCESS;
}
API CUresult cuStreamSynchronize(CUstream s) { return stream_sync(s, false); }
API CUresult cuStreamSynchronize_ptsz(CUstream s) { return stream_sync(s, true); }

API CUresult cuCtxSynchronize(void)
{
	if (!need_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	fake_sleep_until(__atomic_load_n(&F.last_end, __ATOMIC_ACQUIRE));
	sync_pools();
	return CUDA_SUCCESS;
}

/* Puts work of duration d on the timeline; returns when it ends. */
uint64_t timeline_push(struct stream *st, uint64_t d)
{
	pthread_mutex_lock(&F.launch_mu);
	/* a full launch queue blocks the launching thread, as on hardware */
	for (;;) {
		uint64_t now = fake_now();
		while (F.ends_n && F.ends[F.ends_head] <= now) {
			F.ends_head = (F.ends_head + 1) % 4096;
			F.ends_n--;
		}
		if (F.ends_n < F.depth)
			break;
		fake_sleep_until(F.ends[F.ends_head]);
	}
	struct fake_shared *s = fake_shared();
	fake_lock(s);
	uint64_t now = fake_now();
	uint64_t start = s->gpu_free_at > now ? s->gpu_free_at : now;
	uint64_t end = start + d;
	s->gpu_free_at = end;
	if (d) {
		s->ring[s->ring_n % FAKE_RING] = (struct fake_interval){start, end};
		s->ring_n++;
	}
	fake_unlock(s);
	st->tail = end;
	if (end > F.last_end)
		__atomic_store_n(&F.last_end, end, __ATOMIC_RELEASE);
	if (d) {
		F.ends[(F.ends_head + F.ends_n) % 4096] = end;
		F.ends_n++;
		F.busy[F.busy_n % FAKE_RING] = (struct fake_interval){start, end};
		F.busy_n++;
		F.busy_total += d;
	}
	pthread_mutex_unlock(&F.launch_mu);
	return end;
}

API CUresult cuEventCreate(CUevent *ev, unsigned int flags)
{
	(void)flags;
	*ev = (CUevent)calloc(1, sizeof(struct event));
	return CUDA_SUCCESS;
}

API CUresult cuEventDestroy_v2(CUevent ev)
{
	free(ev);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent ev, CUstream s, bool ptsz)
{
	struct event *e = (struct event *)ev;
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	struct fake_shared *sh = fake_shared();
	struct stream *st = stream_of(s, ptsz);
	fake_lock(sh);
	uint64_t now = fake_now();
	uint64_t ts = sh->gpu_free_at > now ? sh->gpu_free_at : now;
	fake_unlock(sh);
	e->ts = ts;
	e->recorded = true;
	st->tail = ts;
	return CUDA_SUCCESS;
}
API CUresult cuEventRecord(CUevent ev, CUstream s) { return event_record(ev, s, false); }
API CUresult cuEventRecord_ptsz(CUevent ev, CUstream s) { return event_record(ev, s, true); }

API CUresult cuEventQuery(CUevent ev)
{
	struct event *e = (struct event *)ev;
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	return !e->recorded || e->ts <= fake_now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

API CUresult cuEventSynchronize(CUevent ev)
{
	struct event *e = (struct event *)ev;
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (e->recorded)
		fake_sleep_until(e->ts);
	sync_pools();
	return CUDA_SUCCESS;
}

API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	struct event *x = (struct event *)a, *y = (struct event *)b;
	if (!x || !y || !x->recorded || !y->recorded)
		return CUDA_ERROR_INVALID_HANDLE;
	uint64_t now = fake_now();
	if (x->ts > now || y->ts > now)
		return CUDA_ERROR_NOT_READY;
	*ms = (float)((double)((int64_t)y->ts - (int64_t)x->ts) / 1e6);
	return CUDA_SUCCESS;
}

/* ---- for the tests: what the simulated GPU saw ---- */

/* GPU time this process's kernels have run by monotonic time t. */
API uint64_t fakegpu_busy_ns(uint64_t t)
{
	pthread_mutex_lock(&F.launch_mu);
	uint64_t busy = F.busy_total;
	uint64_t n = F.busy_n < FAKE_RING ? F.busy_n : FAKE_RING;
	for (uint64_t i = 0; i < n; i++) {
		struct fake_interval *iv = &F.busy[(F.busy_n - 1 - i) % FAKE_RING];
		if (iv->end <= t)
			break;
		busy -= iv->end - (iv->start > t ? iv->start : t);
	}
	pthread_mutex_unlock(&F.launch_mu);
	return busy;
}

API uint64_t fakegpu_mem_used(void) { return __atomic_load_n(&fake_shared()->mem_used, __ATOMIC_ACQUIRE); }
API uint64_t fakegpu_mem_high_water(void) { return __atomic_load_n(&fake_shared()->mem_high, __ATOMIC_ACQUIRE); }
API uint64_t fakegpu_now_ns(void) { return fake_now(); }
