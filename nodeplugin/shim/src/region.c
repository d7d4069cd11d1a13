/*
 * Configuration, the shared accounting region (see include/gpuslice.h for the
 * layout and the locking protocol), charging and crediting, reclaiming the
 * shares of dead processes, and fork.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"

struct gs_state gs = {.fd = -1, .slot_idx = -1};
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER; /* reclaim scans share our OFD */
static int config_parsed;
static int atfork_done;

uint64_t gs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t gs_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void vlog(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "gpuslice[%d]: ", (int)getpid());
	int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
	buf[len++] = '\n';
	ssize_t w = write(2, buf, len); /* stdio buffers would be duplicated by fork */
	(void)w;
}

void gs_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

void gs_debug(const char *fmt, ...)
{
	if (!gs.cfg.debug)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

/* ---- configuration ---- */

/* Parses a byte count: digits with an optional k, M, G, T (powers of 1000) or
 * Ki, Mi, Gi, Ti (powers of 1024) suffix. */
static int parse_bytes(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return -1;
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	uint64_t mul = 1;
	if (*p) {
		int bin = p[1] == 'i';
		uint64_t base = bin ? 1024 : 1000;
		switch (*p) {
		case 'k': case 'K': mul = base; break;
		case 'M': mul = base * base; break;
		case 'G': mul = base * base * base; break;
		case 'T': mul = base * base * base * base; break;
		default: return -1;
		}
		p += bin ? 2 : 1;
		if (*p)
			return -1;
	}
	if (v && mul > UINT64_MAX / v)
		return -1;
	*out = v * mul;
	return 0;
}

static int parse_uint(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || s[0] == '-' || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static void parse_config(void)
{
	struct gs_config *c = &gs.cfg;
	const char *v;
	memset(c, 0, sizeof *c);
	c->env_burst = -1;
	c->ctx_overhead = GPUSLICE_DEFAULT_CONTEXT_OVERHEAD;
	v = getenv(GPUSLICE_ENV_DEBUG);
	c->debug = v && strcmp(v, "1") == 0;

	if ((v = getenv(GPUSLICE_ENV_MEMORY_LIMIT)) && *v) {
		if (parse_bytes(v, &c->env_limit) || c->env_limit == 0)
			snprintf(c->error, sizeof c->error,
				 "%s=\"%s\" is not a byte count (e.g. 8589934592 or 8Gi)", GPUSLICE_ENV_MEMORY_LIMIT, v);
	}
	if ((v = getenv(GPUSLICE_ENV_COMPUTE_SHARE)) && *v) {
		if (parse_uint(v, 1, 100, &c->env_share))
			snprintf(c->error, sizeof c->error, "%s=\"%s\" is not a percentage from 1 to 100",
				 GPUSLICE_ENV_COMPUTE_SHARE, v);
	}
	if ((v = getenv(GPUSLICE_ENV_COMPUTE_BURST)) && *v) {
		if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on"))
			c->env_burst = 1;
		else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off"))
			c->env_burst = 0;
		else
			snprintf(c->error, sizeof c->error, "%s=\"%s\" must be 0 or 1", GPUSLICE_ENV_COMPUTE_BURST, v);
	}
	if ((v = getenv(GPUSLICE_ENV_COMPUTE_WINDOW_MS)) && *v) {
		if (parse_uint(v, 1, 60000, &c->env_window_ms))
			snprintf(c->error, sizeof c->error, "%s=\"%s\" must be milliseconds from 1 to 60000",
				 GPUSLICE_ENV_COMPUTE_WINDOW_MS, v);
	}
	if ((v = getenv(GPUSLICE_ENV_CONTEXT_OVERHEAD)) && *v) {
		if (parse_bytes(v, &c->ctx_overhead))
			snprintf(c->error, sizeof c->error, "%s=\"%s\" is not a byte count",
				 GPUSLICE_ENV_CONTEXT_OVERHEAD, v);
	}
	v = getenv(GPUSLICE_ENV_ACCOUNTING_DIR);
	c->dir_from_env = v && *v;
	snprintf(c->dir, sizeof c->dir, "%s", c->dir_from_env ? v : GPUSLICE_CONTAINER_ACCOUNTING_DIR);
	__atomic_store_n(&config_parsed, 1, __ATOMIC_RELEASE);
}

/* ---- locks ---- */

static int ofd_lock(int fd, uint64_t off, short type, int wait)
{
	struct flock fl;
	memset(&fl, 0, sizeof fl);
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)off;
	fl.l_len = 1;
	int r;
	do
		r = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
	while (r < 0 && errno == EINTR);
	return r;
}

/* ---- the region ---- */

static void sat_sub(uint64_t *p, uint64_t n)
{
	uint64_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
	uint64_t nv;
	do {
		nv = v >= n ? v - n : 0;
	} while (!__atomic_compare_exchange_n(p, &v, nv, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	if (GS_UNLIKELY(v < n))
		gs_debug("credit of %llu exceeds the counter (%llu); clamped at 0", (unsigned long long)n,
			 (unsigned long long)v);
}

static void write_header(struct gpuslice_region_header *h)
{
	memset(h, 0, GPUSLICE_REGION_SIZE);
	h->version = GPUSLICE_REGION_VERSION;
	h->header_size = GPUSLICE_HEADER_SIZE;
	h->slot_size = GPUSLICE_SLOT_SIZE;
	h->slot_count = GPUSLICE_SLOT_COUNT;
	h->memory_limit = gs.cfg.env_limit;
	h->compute_share = gs.cfg.env_share ? gs.cfg.env_share : 100;
	h->flags = gs.cfg.env_burst == 1 ? GPUSLICE_FLAG_COMPUTE_BURST : 0;
	h->compute_window_ms = gs.cfg.env_window_ms ? gs.cfg.env_window_ms : GPUSLICE_DEFAULT_COMPUTE_WINDOW_MS;
	h->created_unix_ns = gs_unix_ns();
	/* the magic last: a reader that sees it sees a complete header */
	__atomic_store_n(&h->magic, GPUSLICE_REGION_MAGIC, __ATOMIC_RELEASE);
}

/* Checks a mapped header; returns NULL when usable, else why not. */
static const char *check_header(const struct gpuslice_region_header *h, off_t file_size, char *buf, size_t n)
{
	if ((size_t)file_size < 64 || h->magic != GPUSLICE_REGION_MAGIC)
		return "not a gpuslice region (bad magic)";
	if (h->version != GPUSLICE_REGION_VERSION) {
		snprintf(buf, n, "region layout version %u, this library uses version %u", h->version,
			 GPUSLICE_REGION_VERSION);
		return buf;
	}
	if (h->header_size < GPUSLICE_HEADER_SIZE || h->header_size % 64 || h->slot_size < GPUSLICE_SLOT_SIZE ||
	    h->slot_size % 64 || h->slot_count == 0 || h->slot_count > 65536)
		return "region geometry is invalid";
	if ((uint64_t)file_size < (uint64_t)h->header_size + (uint64_t)h->slot_size * h->slot_count)
		return "region file is shorter than its header says";
	if (h->memory_limit == 0)
		return "region has no memory limit";
	if (h->compute_share == 0 || h->compute_share > 100)
		return "region has an invalid compute share";
	return NULL;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(gs.broken, sizeof gs.broken, fmt, ap);
	va_end(ap);
}

static void read_comm(char out[16])
{
	memset(out, 0, 16);
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, 15);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\n')
			out[i] = 0;
}

/* Frees slot s (owner dead, its lock held by us). */
static void reclaim_slot(struct gpuslice_region_header *h, struct gpuslice_slot *s)
{
	uint64_t u = __atomic_exchange_n(&s->used, 0, __ATOMIC_ACQ_REL);
	if (u)
		sat_sub(&h->used, u);
	__atomic_fetch_add(&h->reclaimed_bytes, u, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->reclaimed_procs, 1, __ATOMIC_RELAXED);
	gs_debug("reclaimed %llu bytes of dead process %u (%.16s)", (unsigned long long)u, s->pid, s->comm);
	__atomic_store_n(&s->context_bytes, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->allocations, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->state, GPUSLICE_SLOT_FREE, __ATOMIC_RELEASE);
}

int gs_reclaim_dead(void)
{
	struct gpuslice_region_header *h = gs.hdr;
	if (!h)
		return 0;
	int n = 0;
	pthread_mutex_lock(&slot_mu);
	for (uint32_t i = 0; i < h->slot_count; i++) {
		if ((int)i == gs.slot_idx)
			continue;
		struct gpuslice_slot *s = gs_slot(h, i);
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != GPUSLICE_SLOT_LIVE)
			continue;
		if (ofd_lock(gs.fd, GPUSLICE_LOCK_SLOT0 + i, F_WRLCK, 0) != 0)
			continue; /* its owner is alive */
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == GPUSLICE_SLOT_LIVE) {
			reclaim_slot(h, s);
			n++;
		}
		ofd_lock(gs.fd, GPUSLICE_LOCK_SLOT0 + i, F_UNLCK, 0);
	}
	pthread_mutex_unlock(&slot_mu);
	return n;
}

/* Takes a slot for this process; the slot lock stays held until exit. */
static int claim_slot(struct gpuslice_region_header *h)
{
	pthread_mutex_lock(&slot_mu);
	for (uint32_t i = 0; i < h->slot_count; i++) {
		struct gpuslice_slot *s = gs_slot(h, i);
		if (ofd_lock(gs.fd, GPUSLICE_LOCK_SLOT0 + i, F_WRLCK, 0) != 0)
			continue;
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != GPUSLICE_SLOT_FREE)
			reclaim_slot(h, s); /* left by a dead process */
		s->pid = (uint32_t)getpid();
		s->attach_unix_ns = gs_unix_ns();
		__atomic_store_n(&s->used, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->context_bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->allocations, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->gpu_busy_ns, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->launches, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->oom_count, 0, __ATOMIC_RELAXED);
		read_comm(s->comm);
		__atomic_store_n(&s->state, GPUSLICE_SLOT_LIVE, __ATOMIC_RELEASE);
		gs.slot = s;
		gs.slot_idx = (int)i;
		__atomic_fetch_add(&h->attach_count, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&slot_mu);
		return 0;
	}
	pthread_mutex_unlock(&slot_mu);
	return -1;
}

/* Resets the counters of a region nobody is attached to: every charge in it
 * belongs to a process that is gone. */
static void heal(struct gpuslice_region_header *h)
{
	for (uint32_t i = 0; i < h->slot_count; i++) {
		struct gpuslice_slot *s = gs_slot(h, i);
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != GPUSLICE_SLOT_FREE)
			reclaim_slot(h, s);
	}
	uint64_t left = __atomic_exchange_n(&h->used, 0, __ATOMIC_ACQ_REL);
	if (left)
		gs_debug("cleared %llu bytes left by processes that died mid-update", (unsigned long long)left);
}

static int attach(void)
{
	char path[4200], why[160];
	snprintf(path, sizeof path, "%s/%s", gs.cfg.dir, GPUSLICE_REGION_FILE);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0) {
		fail("cannot open accounting region %s: %s", path, strerror(errno));
		return -1;
	}
	/* every container user of the claim must be able to open it */
	struct stat st;
	if (fstat(fd, &st) == 0 && (st.st_mode & 0666) != 0666 && st.st_uid == geteuid())
		fchmod(fd, 0666);
	if (ofd_lock(fd, GPUSLICE_LOCK_INIT, F_WRLCK, 1) != 0) {
		fail("cannot lock accounting region %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	int alone = ofd_lock(fd, GPUSLICE_LOCK_PRESENCE, F_WRLCK, 0) == 0;
	if (!alone && ofd_lock(fd, GPUSLICE_LOCK_PRESENCE, F_RDLCK, 0) != 0) {
		fail("cannot take the presence lock of %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	fstat(fd, &st);
	struct gpuslice_region_header *h = NULL;
	size_t len = 0;
	const char *bad = "empty";
	if (st.st_size >= (off_t)sizeof(struct gpuslice_region_header)) {
		len = (size_t)st.st_size;
		h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (h == MAP_FAILED) {
			fail("cannot map %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		bad = check_header(h, st.st_size, why, sizeof why);
	}
	if (bad && !alone) {
		/* someone else is attached: leave their region untouched */
		fail("accounting region %s is in use and unusable: %s", path, bad);
		if (h)
			munmap(h, len);
		close(fd);
		return -1;
	}
	if (bad) {
		if (!gs.cfg.env_limit) {
			fail("accounting region %s is unusable (%s) and %s is not set to recreate it", path, bad,
			     GPUSLICE_ENV_MEMORY_LIMIT);
			if (h)
				munmap(h, len);
			close(fd);
			return -1;
		}
		if (strcmp(bad, "empty"))
			gs_log("accounting region %s: %s; no process is attached, reinitialising it", path, bad);
		if (h)
			munmap(h, len);
		if (ftruncate(fd, 0) || ftruncate(fd, GPUSLICE_REGION_SIZE)) {
			fail("cannot size %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		len = GPUSLICE_REGION_SIZE;
		h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (h == MAP_FAILED) {
			fail("cannot map %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		write_header(h);
	} else if (alone) {
		heal(h);
	}
	if (alone)
		ofd_lock(fd, GPUSLICE_LOCK_PRESENCE, F_RDLCK, 0); /* downgrade, atomically */
	gs.fd = fd;
	gs.hdr = h;
	gs.map_len = len;
	if (claim_slot(h) != 0) {
		fail("all %u process slots of %s are in use by live processes", h->slot_count, path);
		ofd_lock(fd, GPUSLICE_LOCK_INIT, F_UNLCK, 0);
		munmap(h, len);
		close(fd);
		gs.fd = -1;
		gs.hdr = NULL;
		return -1;
	}
	ofd_lock(fd, GPUSLICE_LOCK_INIT, F_UNLCK, 0);

	/* the stricter of the region's and this process's settings */
	gs.limit = h->memory_limit;
	if (gs.cfg.env_limit && gs.cfg.env_limit < gs.limit)
		gs.limit = gs.cfg.env_limit;
	gs.share = h->compute_share;
	if (gs.cfg.env_share && gs.cfg.env_share < gs.share)
		gs.share = gs.cfg.env_share;
	gs.burst = (h->flags & GPUSLICE_FLAG_COMPUTE_BURST) && gs.cfg.env_burst != 0;
	uint32_t w = gs.cfg.env_window_ms ? gs.cfg.env_window_ms : h->compute_window_ms;
	gs.window_ns = (uint64_t)(w ? w : GPUSLICE_DEFAULT_COMPUTE_WINDOW_MS) * 1000000ull;
	gs.pacing = gs.share < 100;
	gs_debug("attached to %s slot %d: limit %llu bytes, compute share %u%%, burst %s", path, gs.slot_idx,
		 (unsigned long long)gs.limit, gs.share, gs.burst ? "on" : "off");
	return 0;
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
	if (!config_parsed)
		parse_config();
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
	if (!config_parsed)
		parse_config();
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", gs.cfg.dir, GPUSLICE_REGION_FILE);
	if (gs.cfg.error[0]) {
		fail("%s", gs.cfg.error);
		m = GS_BROKEN;
	} else if (!gs.cfg.env_limit && access(path, F_OK) != 0 && !gs.cfg.dir_from_env) {
		gs_debug("no %s and no region at %s: not enforcing", GPUSLICE_ENV_MEMORY_LIMIT, path);
		m = GS_OFF;
	} else if (!gs.cfg.env_limit && access(path, F_OK) != 0) {
		fail("%s is not set and %s does not exist", GPUSLICE_ENV_MEMORY_LIMIT, path);
		m = GS_BROKEN;
	} else {
		m = attach() == 0 ? GS_ENFORCE : GS_BROKEN;
	}
	if (m == GS_BROKEN)
		gs_log("%s; GPU memory allocations are refused", gs.broken);
	__atomic_store_n(&gs.mode, m, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&init_mu);
	return m;
}

static void after_fork_child(void)
{
	/* The child shares the parent's open file description, hence its locks:
	 * drop our reference and attach afresh (new slot, new locks) on first use.
	 * The parent's allocations are not the child's. */
	if (gs.fd >= 0)
		close(gs.fd);
	if (gs.hdr)
		munmap(gs.hdr, gs.map_len);
	gs.fd = -1;
	gs.hdr = NULL;
	gs.slot = NULL;
	gs.slot_idx = -1;
	pthread_mutex_init(&init_mu, NULL);
	pthread_mutex_init(&slot_mu, NULL);
	gs_mem_after_fork();
	gs_pace_after_fork();
	if (__atomic_load_n(&gs.mode, __ATOMIC_RELAXED) == GS_ENFORCE)
		__atomic_store_n(&gs.mode, GS_UNINIT, __ATOMIC_RELEASE);
}

/* ---- charging ---- */

static int charge_slow_retry(int attempt)
{
	if (attempt > 0)
		return 0;
	int freed = gs_reclaim_dead();
	freed += gs_pools_reconcile_all(false);
	return freed > 0;
}

static int charge(uint64_t n, int ctx)
{
	int m = gs_ensure();
	if (m != GS_ENFORCE)
		return m == GS_BROKEN ? -1 : 0;
	if (!n)
		return 0;
	struct gpuslice_region_header *h = gs.hdr;
	const uint64_t lim = gs.limit;
	for (int attempt = 0;; attempt++) {
		uint64_t u = __atomic_load_n(&h->used, __ATOMIC_RELAXED);
		while (n <= lim && u <= lim - n) {
			if (__atomic_compare_exchange_n(&h->used, &u, u + n, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				/* header first, slot second: a crash in between leaves the
				 * header high (healed later), never low */
				__atomic_fetch_add(&gs.slot->used, n, __ATOMIC_RELAXED);
				if (ctx)
					__atomic_fetch_add(&gs.slot->context_bytes, n, __ATOMIC_RELAXED);
				uint64_t hw = __atomic_load_n(&h->high_water, __ATOMIC_RELAXED);
				while (u + n > hw &&
				       !__atomic_compare_exchange_n(&h->high_water, &hw, u + n, 1, __ATOMIC_RELAXED,
								    __ATOMIC_RELAXED))
					;
				return 0;
			}
		}
		if (!charge_slow_retry(attempt))
			break;
	}
	__atomic_fetch_add(&h->oom_count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&gs.slot->oom_count, 1, __ATOMIC_RELAXED);
	gs_debug("refused %llu bytes: %llu of %llu in use", (unsigned long long)n,
		 (unsigned long long)__atomic_load_n(&h->used, __ATOMIC_RELAXED), (unsigned long long)lim);
	return -1;
}

static void credit(uint64_t n, int ctx)
{
	if (!n || __atomic_load_n(&gs.mode, __ATOMIC_ACQUIRE) != GS_ENFORCE)
		return;
	/* slot first, header second: see charge() */
	sat_sub(&gs.slot->used, n);
	if (ctx)
		sat_sub(&gs.slot->context_bytes, n);
	sat_sub(&gs.hdr->used, n);
}

int gs_charge(uint64_t n) { return charge(n, 0); }
void gs_credit(uint64_t n) { credit(n, 0); }
int gs_charge_context(uint64_t n) { return charge(n, 1); }
void gs_credit_context(uint64_t n) { credit(n, 1); }

void gs_note_live(int64_t delta)
{
	if (__atomic_load_n(&gs.mode, __ATOMIC_ACQUIRE) == GS_ENFORCE)
		__atomic_fetch_add(&gs.slot->allocations, (uint64_t)delta, __ATOMIC_RELAXED);
}

uint64_t gs_used(void)
{
	return gs.hdr ? __atomic_load_n(&gs.hdr->used, __ATOMIC_ACQUIRE) : 0;
}

uint64_t gs_limit(void)
{
	if (gs.hdr)
		return gs.limit;
	return gs.cfg.env_limit;
}
