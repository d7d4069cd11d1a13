/*
 * The claim's limits: the read-only file the node plugin writes (see
 * WHERE THE LIBRARY LOOKS in include/gpuslice.h), mapped for the lifetime of
 * the process so that its observed_* fields, which the plugin's enforcer
 * updates in place, are one atomic load away from every charge.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"

/* Picks the accounting directory: the container's fixed one when its limits
 * file exists there, else the environment's, else the fixed one (which then
 * has no limits file, and allocations are refused). */
void gs_limits_pick_dir(void)
{
	struct gs_config *c = &gs.cfg;
	const char *env = c->env_dir[0] ? c->env_dir : NULL;
	if (access(GPUSLICE_CONTAINER_LIMITS, F_OK) == 0 || !env) {
		if (env && strcmp(env, GPUSLICE_CONTAINER_ACCOUNTING_DIR))
			gs_debug("%s exists: %s=%s is ignored", GPUSLICE_CONTAINER_LIMITS, GPUSLICE_ENV_ACCOUNTING_DIR, env);
		snprintf(c->dir, sizeof c->dir, "%s", GPUSLICE_CONTAINER_ACCOUNTING_DIR);
		return;
	}
	snprintf(c->dir, sizeof c->dir, "%s", env);
}

static const char *check_limits(const struct gpuslice_limits *l, char *buf, size_t n)
{
	if (l->magic != GPUSLICE_LIMITS_MAGIC)
		return "not a gpuslice limits file (bad magic)";
	if (l->version != GPUSLICE_LIMITS_VERSION) {
		snprintf(buf, n, "limits file version %u, this library reads version %u", l->version,
			 GPUSLICE_LIMITS_VERSION);
		return buf;
	}
	if (l->size < GPUSLICE_LIMITS_SIZE)
		return "limits file structure is too small";
	if (l->memory_limit == 0)
		return "no memory limit";
	if (l->compute_share == 0 || l->compute_share > 100)
		return "compute share is not 1..100";
	if (l->compute_window_ms == 0 || l->compute_window_ms > 60000)
		return "compute window is not 1..60000 ms";
	return NULL;
}

int gs_limits_open(void)
{
	char path[4200], why[128];
	snprintf(path, sizeof path, "%s/%s", gs.cfg.dir, GPUSLICE_LIMITS_FILE);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			gs_fail("no limits file %s: this process is not in a container of a prepared gpuslice claim", path);
		else
			gs_fail("cannot open limits file %s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)GPUSLICE_LIMITS_SIZE) {
		gs_fail("limits file %s is not a regular file of at least %u bytes", path, GPUSLICE_LIMITS_SIZE);
		close(fd);
		return -1;
	}
	void *p = mmap(NULL, GPUSLICE_LIMITS_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		gs_fail("cannot map limits file %s: %s", path, strerror(errno));
		return -1;
	}
	const struct gpuslice_limits *l = p;
	const char *bad = check_limits(l, why, sizeof why);
	if (bad) {
		gs_fail("limits file %s is unusable: %s", path, bad);
		munmap(p, GPUSLICE_LIMITS_SIZE);
		return -1;
	}
	gs.lim = l;
	return 0;
}

void gs_limits_after_fork(void)
{
	/* the child maps the file afresh when it attaches */
	if (gs.lim)
		munmap((void *)gs.lim, GPUSLICE_LIMITS_SIZE);
	gs.lim = NULL;
}

/* observed_seq is a sequence lock: odd while the plugin writes the
 * observation, +2 for each one. A time of 0 is no observation: none made
 * yet, or withdrawn by an enforcer that stopped. */
bool gs_observation(uint64_t *used, uint64_t *at)
{
	if (!gs.lim)
		return false;
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t s1 = __atomic_load_n(&gs.lim->observed_seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		*used = __atomic_load_n(&gs.lim->observed_used, __ATOMIC_ACQUIRE);
		*at = __atomic_load_n(&gs.lim->observed_unix_ns, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&gs.lim->observed_seq, __ATOMIC_ACQUIRE) == s1)
			return s1 != 0 && *at != 0;
	}
	return false;
}

/* Waits for the plugin's next observation, or its withdrawal, at most a
 * few sample periods; false when neither came (the plugin is not
 * sampling). */
bool gs_wait_observation(void)
{
	if (!gs.lim)
		return false;
	uint64_t seq = __atomic_load_n(&gs.lim->observed_seq, __ATOMIC_ACQUIRE) & ~1ull;
	uint64_t period = gs.lim->sample_period_ms ? gs.lim->sample_period_ms : 200;
	if (period > 1000)
		period = 1000;
	uint64_t deadline = gs_now_ns() + 3 * period * 1000000ull;
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 5000000};
	while (gs_now_ns() < deadline) {
		nanosleep(&ts, NULL);
		/* one whole observation begun after this call */
		if (__atomic_load_n(&gs.lim->observed_seq, __ATOMIC_ACQUIRE) >= seq + 4)
			return true;
		uint64_t used, at;
		if (!gs_observation(&used, &at) && __atomic_load_n(&gs.lim->observed_seq, __ATOMIC_ACQUIRE) > seq)
			return true; /* withdrawn */
	}
	return false;
}
