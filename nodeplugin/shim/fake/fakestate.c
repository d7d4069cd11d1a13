#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
			__atomic_store_n(&s->magic, FAKE_MAGIC, __ATOMIC_RELEASE);
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

static pid_t my_pid;   /* the process my_idx belongs to (a forked child takes its own) */
static int my_idx = -1;

static uint32_t pidns_of_self(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint32_t)st.st_ino : 0;
}

/* The start time of pid in this PID namespace (/proc/<pid>/stat field 22;
 * 0: this process, through /proc/self, right even where /proc is another
 * namespace's), 0 if it is gone. */
static uint64_t start_of(pid_t pid)
{
	char path[64], buf[1024];
	if (pid)
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof path, "/proc/self/stat");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* after the command: state is field 3, start time field 22 */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Frees a live entry's memory and the entry itself, if it is still the
 * process (pidns, pid, start) it was judged dead as. */
static void reap(struct fake_shared *s, struct fake_proc *e, uint32_t pidns, uint32_t pid, uint64_t start)
{
	uint32_t live = FAKE_PROC_LIVE;
	if (!__atomic_compare_exchange_n(&e->state, &live, FAKE_PROC_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	if (e->pidns != pidns || e->pid != pid || e->start != start) {
		__atomic_store_n(&e->state, FAKE_PROC_LIVE, __ATOMIC_RELEASE);
		return;
	}
	uint64_t u = __atomic_exchange_n(&e->used, 0, __ATOMIC_ACQ_REL);
	uint64_t m = __atomic_load_n(&s->mem_used, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&s->mem_used, &m, m >= u ? m - u : 0, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		;
	__atomic_store_n(&e->state, FAKE_PROC_FREE, __ATOMIC_RELEASE);
}

/* This process's entry, taken on its first allocation; NULL when the table
 * is full (the process is then not listed). An entry left by an earlier
 * process of this namespace with the same PID is that process's, which is
 * gone: its memory is freed. When no entry is free, entries of this
 * namespace's dead processes are; entries of other namespaces are the
 * plugin's to judge. */
static struct fake_proc *my_proc(struct fake_shared *s)
{
	pid_t me = getpid();
	if (__atomic_load_n(&my_pid, __ATOMIC_ACQUIRE) == me)
		return &s->procs[my_idx];
	pthread_mutex_lock(&init_mu);
	if (my_pid == me) {
		pthread_mutex_unlock(&init_mu);
		return &s->procs[my_idx];
	}
	uint32_t ns = pidns_of_self();
	uint64_t start = start_of(0);
	for (unsigned i = 0; i < FAKE_PROCS; i++) {
		struct fake_proc *e = &s->procs[i];
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == FAKE_PROC_LIVE && e->pidns == ns && e->pid == (uint32_t)me)
			reap(s, e, ns, (uint32_t)me, e->start);
	}
	int idx = -1;
	for (int pass = 0; pass < 2 && idx < 0; pass++) {
		for (unsigned i = 0; i < FAKE_PROCS && idx < 0; i++) {
			struct fake_proc *e = &s->procs[i];
			uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
			if (pass == 1 && st == FAKE_PROC_LIVE && e->pidns == ns) {
				uint64_t es = e->start;
				if (start_of((pid_t)e->pid) != es)
					reap(s, e, ns, e->pid, es);
				st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
			}
			uint32_t free_ = FAKE_PROC_FREE;
			if (st == FAKE_PROC_FREE &&
			    __atomic_compare_exchange_n(&e->state, &free_, FAKE_PROC_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				idx = (int)i;
		}
	}
	if (idx >= 0) {
		struct fake_proc *e = &s->procs[idx];
		e->pid = (uint32_t)me;
		e->pidns = ns;
		e->start = start;
		__atomic_store_n(&e->used, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&e->state, FAKE_PROC_LIVE, __ATOMIC_RELEASE);
		my_idx = idx;
		__atomic_store_n(&my_pid, me, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&init_mu);
	return idx >= 0 ? &s->procs[idx] : NULL;
}

int fake_mem_reserve(uint64_t n)
{
	struct fake_shared *s = fake_shared();
	uint64_t u = __atomic_load_n(&s->mem_used, __ATOMIC_RELAXED), total = fake_usable_mem();
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
	uint32_t ns = pidns_of_self();
	unsigned n = 0;
	for (unsigned i = 0; i < FAKE_PROCS; i++) {
		struct fake_proc *e = &s->procs[i];
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != FAKE_PROC_LIVE || e->pidns != ns)
			continue;
		struct fake_proc p = *e;
		p.used = __atomic_load_n(&e->used, __ATOMIC_RELAXED);
		if (!p.used || start_of((pid_t)p.pid) != p.start)
			continue;
		if (n < max)
			out[n] = p;
		n++;
	}
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
