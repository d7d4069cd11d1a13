/*
 * The library's lifecycle: the constructor (every process of the container,
 * most of which never touch the GPU), the first call that needs the region,
 * and fork.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "shim_internal.h"

struct gs_state gs = {.fd = -1, .slot_idx = -1};
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int atfork_done;

void gs_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(gs.broken, sizeof gs.broken, fmt, ap);
	va_end(ap);
}

static void after_fork_child(void);

static void ensure_atfork(void)
{
	if (!__atomic_exchange_n(&atfork_done, 1, __ATOMIC_ACQ_REL))
		pthread_atfork(NULL, NULL, after_fork_child);
}

__attribute__((constructor)) static void gs_ctor(void)
{
	/* runs in every process of the container: no files, no driver */
	pthread_mutex_lock(&init_mu);
	gs_config_load();
	pthread_mutex_unlock(&init_mu);
	ensure_atfork();
}

int gs_init_slow(void)
{
	pthread_mutex_lock(&init_mu);
	int m = __atomic_load_n(&gs.mode, __ATOMIC_ACQUIRE);
	if (m != GS_UNINIT) {
		pthread_mutex_unlock(&init_mu);
		return m;
	}
	ensure_atfork();
	gs_config_load();
	gs_limits_pick_dir();
	if (gs.cfg.error[0]) {
		gs_fail("%s", gs.cfg.error);
		m = GS_BROKEN;
	} else {
		m = gs_limits_open() == 0 && gs_region_attach() == 0 ? GS_ENFORCE : GS_BROKEN;
	}
	if (m == GS_BROKEN)
		gs_log("%s; GPU memory allocations are refused", gs.broken);
	__atomic_store_n(&gs.mode, m, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&init_mu);
	return m;
}

/* The child keeps the parent's limits but not its slot, allocations or
 * launches: it attaches afresh on first use. */
static void after_fork_child(void)
{
	gs_region_after_fork();
	gs_limits_after_fork();
	pthread_mutex_init(&init_mu, NULL);
	gs_tables_after_fork();
	gs_vmm_after_fork();
	gs_pools_after_fork();
	gs_contexts_after_fork();
	gs_pace_after_fork();
	if (__atomic_load_n(&gs.mode, __ATOMIC_RELAXED) == GS_ENFORCE)
		__atomic_store_n(&gs.mode, GS_UNINIT, __ATOMIC_RELEASE);
}
