#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fakegpu.h"

static struct fake_shared *shared;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t fake_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void fake_sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void init_mutex(struct fake_shared *s)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->mu, &a);
	pthread_mutexattr_destroy(&a);
}

struct fake_shared *fake_shared(void)
{
	struct fake_shared *s = __atomic_load_n(&shared, __ATOMIC_ACQUIRE);
	if (s)
		return s;
	pthread_mutex_lock(&init_mu);
	if (shared) {
		pthread_mutex_unlock(&init_mu);
		return shared;
	}
	const char *path = getenv("FAKEGPU_STATE");
	if (path && *path) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			abort();
		flock(fd, LOCK_EX);
		struct stat st;
		fstat(fd, &st);
		int fresh = st.st_size < (off_t)sizeof(struct fake_shared);
		if (fresh && ftruncate(fd, sizeof(struct fake_shared)) != 0)
			abort();
		s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (s == MAP_FAILED)
			abort();
		if (fresh || s->magic != FAKE_MAGIC) {
			memset(s, 0, sizeof *s);
			init_mutex(s);
			s->magic = FAKE_MAGIC;
		}
		flock(fd, LOCK_UN);
		close(fd);
	} else {
		s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (s == MAP_FAILED)
			abort();
		init_mutex(s);
		s->magic = FAKE_MAGIC;
	}
	__atomic_store_n(&shared, s, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&init_mu);
	return s;
}

void fake_lock(struct fake_shared *s)
{
	if (pthread_mutex_lock(&s->mu) == EOWNERDEAD)
		pthread_mutex_consistent(&s->mu);
}

void fake_unlock(struct fake_shared *s) { pthread_mutex_unlock(&s->mu); }

/* ---- memory, per process ---- */

static uint64_t proc_key; /* pid << 32 | (index + 1) of this process's entry in procs */

static int alive(uint32_t pid) { return kill((pid_t)pid, 0) == 0 || errno == EPERM; }

/* This process's entry, taken on its first allocation (a forked child takes
 * its own); NULL when the table is full (the process is then not listed). */
static struct fake_proc *my_proc(struct fake_shared *s)
{
	uint32_t me = (uint32_t)getpid();
	uint64_t k = __atomic_load_n(&proc_key, __ATOMIC_ACQUIRE);
	if (k >> 32 == me && (uint32_t)k)
		return &s->procs[(uint32_t)k - 1];
	int idx = -1;
	fake_lock(s);
	k = __atomic_load_n(&proc_key, __ATOMIC_ACQUIRE); /* another thread of ours took it meanwhile */
	if (k >> 32 == me && (uint32_t)k)
		idx = (int)(uint32_t)k - 1;
	/* a dead process's entry with our PID (PIDs are reused), else a free or dead one */
	for (unsigned i = 0; i < FAKE_PROCS && idx < 0; i++)
		if (s->procs[i].pid == me)
			idx = (int)i;
	for (unsigned i = 0; i < FAKE_PROCS && idx < 0; i++)
		if (s->procs[i].pid == 0 || !alive(s->procs[i].pid))
			idx = (int)i;
	if (idx >= 0 && k >> 32 != me) {
		s->procs[idx].pid = me;
		__atomic_store_n(&s->procs[idx].used, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&proc_key, (uint64_t)me << 32 | (uint64_t)(idx + 1), __ATOMIC_RELEASE);
	}
	fake_unlock(s);
	return idx >= 0 ? &s->procs[idx] : NULL;
}

int fake_mem_reserve(uint64_t n)
{
	struct fake_shared *s = fake_shared();
	uint64_t u = __atomic_load_n(&s->mem_used, __ATOMIC_RELAXED), total = fake_total_mem();
	do {
		if (n > total || u > total - n)
			return -1;
	} while (!__atomic_compare_exchange_n(&s->mem_used, &u, u + n, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	uint64_t hw = __atomic_load_n(&s->mem_high, __ATOMIC_RELAXED);
	while (u + n > hw && !__atomic_compare_exchange_n(&s->mem_high, &hw, u + n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	struct fake_proc *p = my_proc(s);
	if (p)
		__atomic_fetch_add(&p->used, n, __ATOMIC_RELAXED);
	return 0;
}

void fake_mem_release(uint64_t n)
{
	struct fake_shared *s = fake_shared();
	uint64_t u = __atomic_load_n(&s->mem_used, __ATOMIC_RELAXED);
	if (u < n)
		abort(); /* a bug in the fake or a double free it let through */
	__atomic_fetch_sub(&s->mem_used, n, __ATOMIC_ACQ_REL);
	struct fake_proc *p = my_proc(s);
	if (!p)
		return;
	uint64_t pu = __atomic_load_n(&p->used, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&p->used, &pu, pu >= n ? pu - n : 0, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

unsigned fake_processes(struct fake_proc *out, unsigned max)
{
	struct fake_shared *s = fake_shared();
	unsigned n = 0;
	fake_lock(s);
	for (unsigned i = 0; i < FAKE_PROCS; i++) {
		struct fake_proc p = {.pid = s->procs[i].pid, .used = __atomic_load_n(&s->procs[i].used, __ATOMIC_RELAXED)};
		if (!p.pid || !p.used || !alive(p.pid))
			continue;
		if (n < max)
			out[n] = p;
		n++;
	}
	fake_unlock(s);
	return n;
}

unsigned fake_device_util(uint64_t period)
{
	struct fake_shared *s = fake_shared();
	uint64_t now = fake_now(), from = now - period, busy = 0;
	fake_lock(s);
	uint64_t n = s->ring_n < FAKE_RING ? s->ring_n : FAKE_RING;
	for (uint64_t i = 0; i < n; i++) {
		struct fake_interval *iv = &s->ring[(s->ring_n - 1 - i) % FAKE_RING];
		uint64_t a = iv->start > from ? iv->start : from, b = iv->end < now ? iv->end : now;
		if (b > a)
			busy += b - a;
	}
	fake_unlock(s);
	return (unsigned)(busy * 100 / period);
}
