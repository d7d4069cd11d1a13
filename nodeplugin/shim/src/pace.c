/*
 * Compute share: cooperative pacing of kernel launches.
 *
 * The claim has a token bucket of GPU time in its region, shared by all its
 * processes: it fills at share% of wall-clock time, up to share% of one
 * window (GPUSLICE_COMPUTE_WINDOW_MS). A launch waits while the bucket is
 * negative, then takes its expected cost out. The cost is measured, not
 * guessed: each paced launch is bracketed by two CUDA events on its stream,
 * and when the second one has completed, the elapsed GPU time replaces the
 * estimate (an average of the same kernel's, or graph's, earlier runs).
 * A kernel never measured before runs alone (one in flight) until it has
 * been measured, and unmeasured work in flight is bounded by one window's
 * share, so a burst of launches cannot run ahead of the bucket.
 *
 * Burst (GPUSLICE_COMPUTE_BURST=1, from the platform): when NVML says the
 * GPU is busy only with this claim's own work, launches are not held back.
 * NVML samples utilisation over a period of up to a second, so when another
 * tenant starts, the bursting claim returns to its share within about that.
 *
 * With share 100 (or unset) none of this runs: a launch costs one branch.
 */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "hash.h"
#include "shim_internal.h"

#define PENDING_MAX 256
#define EST_SLOTS 1024
#define EV_CTXS 8
#define EV_PER_CTX 128

struct pending {
	CUevent e0, e1;
	CUcontext ctx;
	int64_t est;
	uint64_t key;
};

struct est {
	uint64_t key;
	int64_t ns;
	uint32_t samples;
	uint32_t inflight;
};

struct evpool {
	CUcontext ctx;
	int n;
	CUevent ev[EV_PER_CTX];
};

static struct {
	pthread_mutex_t mu;
	struct pending q[PENDING_MAX];
	unsigned head, n;
	int64_t inflight_est;
	struct est est[EST_SLOTS];
	struct evpool evs[EV_CTXS];
} P = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct {
	pthread_mutex_t mu;
	uint64_t checked_ns, busy0;
	bool ok;
	int nvml; /* 0 untried, 1 ready, -1 unavailable */
	nvmlDevice_t dev;
} B = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct ticket {
	CUstream stream;
	CUevent e0, e1;
	CUcontext ctx;
	int64_t est;
	uint64_t key;
	bool measured;
};

static inline bool pacing_on(void) { return gs_ensure() == GS_ENFORCE && gs.pacing; }

/* A launch's key in the estimate table, never 0: 0 marks an empty entry. */
static inline uint64_t launch_key(uint64_t k) { return gs_mix64(k) | 1; }

static int64_t bucket_cap(void) { return (int64_t)(gs.window_ns * gs.share / 100); }

/* adds delta to the bucket, never above its capacity */
static void tokens_add(int64_t delta)
{
	int64_t *t = &gs.hdr->pace_tokens_ns;
	int64_t cap = bucket_cap();
	int64_t v = __atomic_load_n(t, __ATOMIC_RELAXED), nv;
	do {
		nv = v + delta;
		if (nv > cap)
			nv = cap;
	} while (!__atomic_compare_exchange_n(t, &v, nv, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
}

static void refill(uint64_t now)
{
	uint64_t *lastp = &gs.hdr->pace_last_ns;
	uint64_t last = __atomic_load_n(lastp, __ATOMIC_ACQUIRE);
	if (now <= last || !__atomic_compare_exchange_n(lastp, &last, now, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	uint64_t dt = now - last;
	uint64_t cap = (uint64_t)bucket_cap();
	uint64_t add = dt > gs.window_ns ? cap : dt * gs.share / 100;
	tokens_add((int64_t)add);
}

static struct est *est_of(uint64_t key)
{
	struct est *e = &P.est[key % EST_SLOTS];
	if (e->key != key)
		*e = (struct est){.key = key};
	return e;
}

/* P.mu held */
static void put_events(CUcontext ctx, CUevent a, CUevent b)
{
	struct evpool *ep = NULL;
	for (int i = 0; i < EV_CTXS; i++)
		if (P.evs[i].ctx == ctx)
			ep = &P.evs[i];
	if (ep && ep->n + 2 <= EV_PER_CTX) {
		ep->ev[ep->n++] = a;
		ep->ev[ep->n++] = b;
		return;
	}
	__typeof__(&cuEventDestroy_v2) d = REAL(cuEventDestroy_v2);
	if (d) {
		d(a);
		d(b);
	}
}

/* P.mu held */
static bool get_events(CUcontext *ctxp, CUevent *a, CUevent *b)
{
	CUcontext ctx = NULL;
	__typeof__(&cuCtxGetCurrent) gc = REAL(cuCtxGetCurrent);
	if (!gc || gc(&ctx) != CUDA_SUCCESS || !ctx)
		return false;
	*ctxp = ctx;
	struct evpool *ep = NULL, *empty = NULL;
	for (int i = 0; i < EV_CTXS; i++) {
		if (P.evs[i].ctx == ctx)
			ep = &P.evs[i];
		else if (!P.evs[i].ctx && !empty)
			empty = &P.evs[i];
	}
	if (!ep && empty) {
		ep = empty;
		ep->ctx = ctx;
		ep->n = 0;
	}
	if (ep && ep->n >= 2) {
		*b = ep->ev[--ep->n];
		*a = ep->ev[--ep->n];
		return true;
	}
	__typeof__(&cuEventCreate) cr = REAL(cuEventCreate);
	if (!cr || cr(a, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
		return false;
	if (cr(b, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
		__typeof__(&cuEventDestroy_v2) d = REAL(cuEventDestroy_v2);
		if (d)
			d(*a);
		return false;
	}
	return true;
}

/* P.mu held: books a finished launch */
static void complete(struct pending *p, int64_t actual)
{
	if (actual < 0)
		actual = 0;
	tokens_add(p->est - actual);
	__atomic_fetch_add(&gs.hdr->gpu_busy_ns, (uint64_t)actual, __ATOMIC_RELAXED);
	__atomic_fetch_add(&gs.slot->gpu_busy_ns, (uint64_t)actual, __ATOMIC_RELAXED);
	struct est *e = &P.est[p->key % EST_SLOTS];
	if (e->key == p->key) {
		if (e->inflight)
			e->inflight--;
		e->ns = e->samples ? (e->ns * 7 + actual) / 8 : actual;
		if (e->samples < 1000000)
			e->samples++;
	}
	P.inflight_est -= p->est;
	put_events(p->ctx, p->e0, p->e1);
	P.head = (P.head + 1) % PENDING_MAX;
	P.n--;
}

/* P.mu held: books every finished launch, oldest first; with wait, waits
 * for the oldest one first */
static void drain(bool wait)
{
	__typeof__(&cuEventQuery) q = REAL(cuEventQuery);
	__typeof__(&cuEventElapsedTime) el = REAL(cuEventElapsedTime);
	__typeof__(&cuEventSynchronize) sy = REAL(cuEventSynchronize);
	if (wait && P.n && sy)
		sy(P.q[P.head].e1);
	while (P.n && q && el) {
		struct pending *p = &P.q[P.head];
		CUresult r = q(p->e1);
		if (r == CUDA_ERROR_NOT_READY)
			break;
		float ms = 0;
		int64_t actual = p->est;
		if (r == CUDA_SUCCESS && el(&ms, p->e0, p->e1) == CUDA_SUCCESS)
			actual = (int64_t)((double)ms * 1e6);
		complete(p, actual);
	}
}

static bool others_idle(uint64_t now)
{
	pthread_mutex_lock(&B.mu);
	if (B.checked_ns && now - B.checked_ns < 50000000ull) {
		bool ok = B.ok;
		pthread_mutex_unlock(&B.mu);
		return ok;
	}
	if (B.nvml == 0) {
		__typeof__(&nvmlInit_v2) init = REAL(nvmlInit_v2);
		__typeof__(&nvmlDeviceGetHandleByIndex_v2) gh = REAL(nvmlDeviceGetHandleByIndex_v2);
		B.nvml = init && gh && init() == NVML_SUCCESS && gh(0, &B.dev) == NVML_SUCCESS ? 1 : -1;
		if (B.nvml < 0)
			gs_log("compute burst is configured but NVML is unavailable; pacing to the share instead");
	}
	uint64_t busy = __atomic_load_n(&gs.hdr->gpu_busy_ns, __ATOMIC_RELAXED);
	bool ok = false;
	nvmlUtilization_t u;
	__typeof__(&nvmlDeviceGetUtilizationRates) gu = REAL(nvmlDeviceGetUtilizationRates);
	if (B.nvml == 1 && B.checked_ns && gu && gu(B.dev, &u) == NVML_SUCCESS) {
		double own = 100.0 * (double)(busy - B.busy0) / (double)(now - B.checked_ns);
		ok = (double)u.gpu - own < 10.0;
	}
	B.checked_ns = now;
	B.busy0 = busy;
	B.ok = ok;
	pthread_mutex_unlock(&B.mu);
	return ok;
}

static void wait_tokens(int64_t est)
{
	struct gpuslice_region_header *h = gs.hdr;
	for (;;) {
		uint64_t now = gs_now_ns();
		refill(now);
		int64_t tok = __atomic_load_n(&h->pace_tokens_ns, __ATOMIC_ACQUIRE);
		if (tok >= 0)
			break;
		if (gs.burst && others_idle(now)) {
			int64_t v = tok;
			while (v < 0 && !__atomic_compare_exchange_n(&h->pace_tokens_ns, &v, 0, 1, __ATOMIC_ACQ_REL,
								     __ATOMIC_RELAXED))
				;
			break;
		}
		uint64_t ns = (uint64_t)(-tok) * 100 / gs.share;
		if (ns < 20000)
			ns = 20000;
		if (ns > 50000000)
			ns = 50000000;
		struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
		nanosleep(&ts, NULL);
		__atomic_fetch_add(&h->throttled_ns, gs_now_ns() - now, __ATOMIC_RELAXED);
	}
	__atomic_fetch_sub(&h->pace_tokens_ns, est, __ATOMIC_ACQ_REL);
}

/* Before a launch. Returns with P.mu held: the two events and the launch
 * must reach the stream back to back. */
static void pace_begin(struct ticket *t, uint64_t key, CUstream stream, bool ptsz)
{
	t->stream = (ptsz && !stream) ? CU_STREAM_PER_THREAD : stream;
	t->key = key;
	t->measured = false;
	pthread_mutex_lock(&P.mu);
	drain(false);
	/* something never measured runs one at a time until it is */
	for (struct est *e = est_of(key); e->samples == 0 && e->inflight && P.n; e = est_of(key))
		drain(true);
	int64_t cap = bucket_cap();
	while (P.n && (P.inflight_est > cap || P.n >= PENDING_MAX))
		drain(true);
	struct est *e = est_of(key);
	t->est = e->samples ? e->ns : 0;
	pthread_mutex_unlock(&P.mu);

	wait_tokens(t->est);

	pthread_mutex_lock(&P.mu);
	__typeof__(&cuEventRecord) rec = REAL(cuEventRecord);
	if (rec && get_events(&t->ctx, &t->e0, &t->e1)) {
		if (rec(t->e0, t->stream) == CUDA_SUCCESS)
			t->measured = true;
		else
			put_events(t->ctx, t->e0, t->e1);
	}
}

static void pace_end(struct ticket *t, CUresult r)
{
	__typeof__(&cuEventRecord) rec = REAL(cuEventRecord);
	if (r == CUDA_SUCCESS && t->measured && rec(t->e1, t->stream) == CUDA_SUCCESS) {
		struct pending *p = &P.q[(P.head + P.n) % PENDING_MAX];
		*p = (struct pending){.e0 = t->e0, .e1 = t->e1, .ctx = t->ctx, .est = t->est, .key = t->key};
		P.n++;
		P.inflight_est += t->est;
		est_of(t->key)->inflight++;
	} else {
		if (t->measured)
			put_events(t->ctx, t->e0, t->e1);
		if (r != CUDA_SUCCESS)
			tokens_add(t->est); /* nothing ran */
	}
	if (r == CUDA_SUCCESS) {
		__atomic_fetch_add(&gs.hdr->launches, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&gs.slot->launches, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&P.mu);
}

static inline uint64_t kernel_key(const void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				  unsigned bz, unsigned shmem)
{
	uint64_t grid = (uint64_t)gx * gy * gz, block = (uint64_t)bx * by * bz;
	return launch_key((uint64_t)(uintptr_t)f ^ (grid * 0x9e3779b97f4a7c15ull) ^ (block << 40) ^ ((uint64_t)shmem << 20));
}

#define LAUNCH_BODY(real, ptsz, key, stream, call)           \
	do {                                                  \
		if (GS_LIKELY(!pacing_on()))                  \
			return call;                          \
		struct ticket t;                              \
		pace_begin(&t, key, stream, ptsz);            \
		CUresult r_ = call;                           \
		pace_end(&t, r_);                             \
		return r_;                                    \
	} while (0)

GS_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				  unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream,
				  void **params, void **extra)
{
	NEED_REAL(real, cuLaunchKernel);
	LAUNCH_BODY(real, false, kernel_key(f, gx, gy, gz, bx, by, bz, shmem), stream,
		    real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra));
}

GS_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
				       unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
				       CUstream stream, void **params, void **extra)
{
	NEED_REAL(real, cuLaunchKernel_ptsz);
	LAUNCH_BODY(real, true, kernel_key(f, gx, gy, gz, bx, by, bz, shmem), stream,
		    real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra));
}

static inline uint64_t config_key(const CUlaunchConfig *c, CUfunction f)
{
	if (!c)
		return launch_key((uint64_t)(uintptr_t)f);
	return kernel_key(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
			  c->sharedMemBytes);
}

GS_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
	NEED_REAL(real, cuLaunchKernelEx);
	LAUNCH_BODY(real, false, config_key(config, f), config ? config->hStream : NULL,
		    real(config, f, params, extra));
}

GS_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
	NEED_REAL(real, cuLaunchKernelEx_ptsz);
	LAUNCH_BODY(real, true, config_key(config, f), config ? config->hStream : NULL,
		    real(config, f, params, extra));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
					     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
					     CUstream stream, void **params)
{
	NEED_REAL(real, cuLaunchCooperativeKernel);
	LAUNCH_BODY(real, false, kernel_key(f, gx, gy, gz, bx, by, bz, shmem), stream,
		    real(f, gx, gy, gz, bx, by, bz, shmem, stream, params));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
						  unsigned int bx, unsigned int by, unsigned int bz,
						  unsigned int shmem, CUstream stream, void **params)
{
	NEED_REAL(real, cuLaunchCooperativeKernel_ptsz);
	LAUNCH_BODY(real, true, kernel_key(f, gx, gy, gz, bx, by, bz, shmem), stream,
		    real(f, gx, gy, gz, bx, by, bz, shmem, stream, params));
}

GS_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
	NEED_REAL(real, cuGraphLaunch);
	LAUNCH_BODY(real, false, launch_key((uint64_t)(uintptr_t)exec), stream, real(exec, stream));
}

GS_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream)
{
	NEED_REAL(real, cuGraphLaunch_ptsz);
	LAUNCH_BODY(real, true, launch_key((uint64_t)(uintptr_t)exec), stream, real(exec, stream));
}

void gs_pace_forget_context(CUcontext ctx)
{
	/* its events went with it: book its launches at their estimates */
	pthread_mutex_lock(&P.mu);
	unsigned n = P.n;
	struct pending keep[PENDING_MAX];
	unsigned nk = 0;
	for (unsigned i = 0; i < n; i++) {
		struct pending *p = &P.q[(P.head + i) % PENDING_MAX];
		if (p->ctx == ctx) {
			P.inflight_est -= p->est;
			struct est *e = &P.est[p->key % EST_SLOTS];
			if (e->key == p->key && e->inflight)
				e->inflight--;
		} else {
			keep[nk++] = *p;
		}
	}
	for (unsigned i = 0; i < nk; i++)
		P.q[i] = keep[i];
	P.head = 0;
	P.n = nk;
	for (int i = 0; i < EV_CTXS; i++)
		if (P.evs[i].ctx == ctx) {
			P.evs[i].ctx = NULL;
			P.evs[i].n = 0;
		}
	pthread_mutex_unlock(&P.mu);
}

void gs_pace_after_fork(void)
{
	/* the parent's events and launches are not the child's */
	memset(&P, 0, sizeof P);
	pthread_mutex_init(&P.mu, NULL);
	pthread_mutex_init(&B.mu, NULL);
	B.checked_ns = 0;
	B.nvml = 0;
}
