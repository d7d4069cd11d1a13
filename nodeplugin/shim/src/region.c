/*
 * The claim's shared accounting region (see include/gpuslice.h for the layout
 * and the locking protocol): attaching to it, this process's slot, charging
 * and crediting, and reclaiming the shares of dead processes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim_internal.h"

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER; /* reclaim scans share our OFD */

/* ---- this process's changes the plugin's observation cannot hold yet ----
 * The observation is the claim's device memory when the plugin's last sample
 * began; what this process charged and credited since then is added to it,
 * to 10 ms (buckets of CLOCK_REALTIME, the plugin's clock too, from the one
 * holding the sample's start). Charges and credits count alike, so a
 * process that allocates and frees in a loop adds nothing. Around the
 * sample's start either may already be in the observation: counted twice,
 * a charge makes a refusal that waits for the next observation; a credit
 * lets this process take that much more until the next observation, which
 * the plugin's enforcer then holds to the limit. */
#define RECENT_NS 10000000ull
#define RECENT_BUCKETS 256u /* 2.56 s: an older observation only the region's count refines */
struct recent_bucket {
	uint64_t id; /* unix time / RECENT_NS */
	uint64_t plus, minus;
};
static struct recent_bucket recent[RECENT_BUCKETS];
static pthread_mutex_t recent_mu = PTHREAD_MUTEX_INITIALIZER;

/* CLOCK_REALTIME_COARSE: a few ns instead of tens on every charge and
 * credit, and up to a tick behind (observed_now looks one bucket further
 * back for it). */
static uint64_t coarse_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void note_recent(uint64_t plus, uint64_t minus)
{
	uint64_t id = coarse_unix_ns() / RECENT_NS;
	pthread_mutex_lock(&recent_mu);
	struct recent_bucket *b = &recent[id % RECENT_BUCKETS];
	if (b->id != id) {
		b->id = id;
		b->plus = b->minus = 0;
	}
	b->plus += plus;
	b->minus += minus;
	pthread_mutex_unlock(&recent_mu);
}

/* The claim's memory as observed at unix time `at`, with this process's
 * changes since (an observation older than RECENT_BUCKETS as it is: the
 * region's count holds those changes); 0 without an observation. */
static uint64_t observed_now(void)
{
	uint64_t obs, at;
	if (!gs_observation(&obs, &at))
		return 0;
	/* from the bucket before the sample's: this process's clock is the
	 * coarse one, up to a tick behind the plugin's, so a charge just after
	 * the sample began can carry an earlier bucket's time (counted twice
	 * at worst, which only waits for the next observation) */
	uint64_t first = at / RECENT_NS - 1, now = coarse_unix_ns() / RECENT_NS + 1;
	if (now < first || now - first >= RECENT_BUCKETS)
		return obs;
	int64_t net = 0;
	pthread_mutex_lock(&recent_mu);
	for (uint64_t id = first; id <= now; id++) {
		struct recent_bucket *b = &recent[id % RECENT_BUCKETS];
		if (b->id == id)
			net += (int64_t)b->plus - (int64_t)b->minus;
	}
	pthread_mutex_unlock(&recent_mu);
	return net < 0 && (uint64_t)-net > obs ? 0 : obs + (uint64_t)net;
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
	/* the limits file's, never the environment's: libraries older than the
	 * limits file read them here */
	h->memory_limit = gs.lim->memory_limit;
	h->compute_share = gs.lim->compute_share;
	h->flags = gs.lim->flags;
	h->compute_window_ms = gs.lim->compute_window_ms;
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
	if (h->header_size < GPUSLICE_HEADER_SIZE || h->header_size > GPUSLICE_MAX_HEADER_SIZE || h->header_size % 64 ||
	    h->slot_size < GPUSLICE_SLOT_SIZE || h->slot_size > GPUSLICE_MAX_SLOT_SIZE || h->slot_size % 64 ||
	    h->slot_count == 0 || h->slot_count > GPUSLICE_MAX_SLOT_COUNT)
		return "region geometry is invalid";
	if ((uint64_t)file_size < (uint64_t)h->header_size + (uint64_t)h->slot_size * h->slot_count)
		return "region file is shorter than its header says";
	return NULL;
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
	for (uint32_t i = 0; i < gs.slot_count; i++) {
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
	for (uint32_t i = 0; i < gs.slot_count; i++) {
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
	for (uint32_t i = 0; i < gs.slot_count; i++) {
		struct gpuslice_slot *s = gs_slot(h, i);
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != GPUSLICE_SLOT_FREE)
			reclaim_slot(h, s);
	}
	uint64_t left = __atomic_exchange_n(&h->used, 0, __ATOMIC_ACQ_REL);
	if (left)
		gs_debug("cleared %llu bytes left by processes that died mid-update", (unsigned long long)left);
}

static struct gpuslice_region_header *map_region(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

int gs_region_attach(void)
{
	char path[4200], why[160];
	struct gpuslice_region_header *h = NULL;
	size_t len = 0;
	bool init_locked = false, alone;
	const char *bad = "empty";
	struct stat st;

	snprintf(path, sizeof path, "%s/%s", gs.cfg.dir, GPUSLICE_REGION_FILE);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0) {
		gs_fail("cannot open accounting region %s: %s", path, strerror(errno));
		return -1;
	}
	/* every container user of the claim must be able to open it */
	if (fstat(fd, &st) == 0 && (st.st_mode & 0666) != 0666 && st.st_uid == geteuid())
		fchmod(fd, 0666);
	if (ofd_lock(fd, GPUSLICE_LOCK_INIT, F_WRLCK, 1) != 0) {
		gs_fail("cannot lock accounting region %s: %s", path, strerror(errno));
		goto fail;
	}
	init_locked = true;
	alone = ofd_lock(fd, GPUSLICE_LOCK_PRESENCE, F_WRLCK, 0) == 0;
	if (!alone && ofd_lock(fd, GPUSLICE_LOCK_PRESENCE, F_RDLCK, 0) != 0) {
		gs_fail("cannot take the presence lock of %s: %s", path, strerror(errno));
		goto fail;
	}
	fstat(fd, &st);
	if (st.st_size >= (off_t)sizeof(struct gpuslice_region_header)) {
		len = (size_t)st.st_size;
		if (!(h = map_region(fd, len))) {
			gs_fail("cannot map %s: %s", path, strerror(errno));
			goto fail;
		}
		bad = check_header(h, st.st_size, why, sizeof why);
	}
	if (bad && !alone) {
		/* someone else is attached: leave their region untouched */
		gs_fail("accounting region %s is in use and unusable: %s", path, bad);
		goto fail;
	}
	if (bad) {
		if (strcmp(bad, "empty"))
			gs_log("accounting region %s: %s; no process is attached, reinitialising it", path, bad);
		if (h) {
			munmap(h, len);
			h = NULL;
		}
		if (ftruncate(fd, 0) || ftruncate(fd, GPUSLICE_REGION_SIZE)) {
			gs_fail("cannot size %s: %s", path, strerror(errno));
			goto fail;
		}
		len = GPUSLICE_REGION_SIZE;
		if (!(h = map_region(fd, len))) {
			gs_fail("cannot map %s: %s", path, strerror(errno));
			goto fail;
		}
		write_header(h);
	}
	/* from here on the geometry is ours, whatever the file says later */
	gs.hdr_size = h->header_size;
	gs.slot_size = h->slot_size;
	gs.slot_count = h->slot_count;
	if (!bad && alone)
		heal(h);
	if (alone)
		ofd_lock(fd, GPUSLICE_LOCK_PRESENCE, F_RDLCK, 0); /* downgrade, atomically */
	gs.fd = fd; /* claim_slot locks through it */
	gs.hdr = h;
	gs.map_len = len;
	if (claim_slot(h) != 0) {
		gs_fail("all %u process slots of %s are in use by live processes", gs.slot_count, path);
		goto fail;
	}
	ofd_lock(fd, GPUSLICE_LOCK_INIT, F_UNLCK, 0);

	gs_config_resolve(gs.lim);
	gs_debug("attached to %s slot %d: limit %llu bytes, compute share %u%%, burst %s, window %llu ms", path,
		 gs.slot_idx, (unsigned long long)gs.limit, gs.share, gs.burst ? "on" : "off",
		 (unsigned long long)(gs.window_ns / 1000000));
	return 0;

fail:
	/* close drops our locks only with the last copy of the descriptor, and
	 * a child forked meanwhile holds one: every attaching process waits on
	 * the init lock, so it is released explicitly */
	if (init_locked)
		ofd_lock(fd, GPUSLICE_LOCK_INIT, F_UNLCK, 0);
	if (h)
		munmap(h, len);
	close(fd);
	gs.fd = -1;
	gs.hdr = NULL;
	return -1;
}

/* The child shares the parent's open file description, hence its locks:
 * drop our reference; the child attaches afresh (new slot, new locks) on
 * first use. */
void gs_region_after_fork(void)
{
	if (gs.fd >= 0)
		close(gs.fd);
	if (gs.hdr)
		munmap(gs.hdr, gs.map_len);
	gs.fd = -1;
	gs.hdr = NULL;
	gs.slot = NULL;
	gs.slot_idx = -1;
	pthread_mutex_init(&slot_mu, NULL);
	memset(recent, 0, sizeof recent); /* the child's changes are its own */
	pthread_mutex_init(&recent_mu, NULL);
}

/* ---- charging ---- */

static inline bool fits(uint64_t used, uint64_t n, uint64_t lim) { return n <= lim && used <= lim - n; }

/* Charges against the larger of the region's count and the plugin's
 * observation with this process's changes since (a process may have zeroed
 * the count; only the observation cannot be written from the container). A
 * refusal first reclaims dead processes' shares; one that only the
 * observation refuses waits for the plugin's next one once: another process
 * may have freed memory since the last one. */
static int charge(uint64_t n, int ctx)
{
	int m = gs_ensure();
	if (m != GS_ENFORCE)
		return -1;
	if (!n)
		return 0;
	struct gpuslice_region_header *h = gs.hdr;
	const uint64_t lim = gs.limit;
	bool reclaimed = false, waited = false;
	uint64_t u, obs;
	for (;;) {
		u = __atomic_load_n(&h->used, __ATOMIC_RELAXED);
		obs = observed_now();
		while (fits(u > obs ? u : obs, n, lim)) {
			if (__atomic_compare_exchange_n(&h->used, &u, u + n, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				note_recent(n, 0);
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
		if (!reclaimed) {
			reclaimed = true;
			if (gs_reclaim_dead() + gs_pools_reconcile_all(false) > 0)
				continue;
		}
		if (!waited && fits(u, n, lim)) {
			waited = true;
			if (gs_wait_observation())
				continue;
		}
		break;
	}
	__atomic_fetch_add(&h->oom_count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&gs.slot->oom_count, 1, __ATOMIC_RELAXED);
	gs_debug("refused %llu bytes: %llu of %llu in use (the node plugin observed %llu)", (unsigned long long)n,
		 (unsigned long long)u, (unsigned long long)lim, (unsigned long long)obs);
	return -1;
}

static void credit(uint64_t n, int ctx)
{
	if (!n || __atomic_load_n(&gs.mode, __ATOMIC_ACQUIRE) != GS_ENFORCE)
		return;
	note_recent(0, n);
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
