/*
 * The fake driver's process-local state (a process's contexts, allocations,
 * pools and streams are its own; the device is shared, see fakestate.c), the
 * table of live allocations, the address space, and fork.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "../src/hash.h"
#include "fakecuda.h"

struct fake_driver F = {.mu = PTHREAD_MUTEX_INITIALIZER, .launch_mu = PTHREAD_MUTEX_INITIALIZER};
__thread struct ctx *current;
__thread struct stream per_thread;

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : def;
}

static void child_reset(void)
{
	pthread_mutex_init(&F.mu, NULL);
	pthread_mutex_init(&F.launch_mu, NULL);
	F.inited = false;
	memset(&F.primary, 0, sizeof F.primary);
	if (F.tab)
		memset(F.tab, 0, F.cap * sizeof *F.tab);
	F.len = 0;
	F.pools = F.default_pool = F.current_pool = NULL;
	F.vmms = NULL;
	F.maps = NULL;
	F.legacy.tail = 0;
	F.last_end = 0;
	F.ends_n = F.ends_head = 0;
	F.busy_n = F.busy_total = 0;
	current = NULL;
	per_thread.tail = 0;
}

__attribute__((constructor)) static void fake_ctor(void)
{
	F.ctx_bytes = env_u64("FAKEGPU_CONTEXT_BYTES", 300 * MiB);
	F.granule = env_u64("FAKEGPU_POOL_GRANULE", 2 * MiB);
	F.depth = (unsigned)env_u64("FAKEGPU_QUEUE_DEPTH", 1024);
	if (F.depth < 1 || F.depth > 4096)
		F.depth = 1024;
	F.next_va = 0x7f0000000000ull;
	F.next_handle = 0x1000;
	F.primary.primary = true;
	pthread_atfork(NULL, NULL, child_reset);
}


/* F.mu held */
void tab_put(struct alloc a)
{
	if ((F.len + 1) * 2 > F.cap) {
		size_t nc = F.cap ? F.cap * 2 : 1024;
		struct alloc *nt = calloc(nc, sizeof *nt), *old = F.tab;
		size_t oc = F.cap;
		F.tab = nt;
		F.cap = nc;
		F.len = 0;
		for (size_t i = 0; i < oc; i++)
			if (old[i].key)
				tab_put(old[i]);
		free(old);
	}
	size_t i = gs_mix64(a.key) & (F.cap - 1);
	while (F.tab[i].key)
		i = (i + 1) & (F.cap - 1);
	F.tab[i] = a;
	F.len++;
}

/* F.mu held */
bool tab_take(uint64_t key, struct alloc *out)
{
	if (!F.cap || !key)
		return false;
	size_t i = gs_mix64(key) & (F.cap - 1);
	for (; F.tab[i].key; i = (i + 1) & (F.cap - 1)) {
		if (F.tab[i].key != key)
			continue;
		*out = F.tab[i];
		/* remove and reinsert the rest of the cluster */
		F.tab[i].key = 0;
		F.len--;
		for (size_t j = (i + 1) & (F.cap - 1); F.tab[j].key; j = (j + 1) & (F.cap - 1)) {
			struct alloc a = F.tab[j];
			F.tab[j].key = 0;
			F.len--;
			tab_put(a);
		}
		return true;
	}
	return false;
}

uint64_t new_va(uint64_t size)
{
	uint64_t v = F.next_va;
	F.next_va += round_up(size ? size : 1, 2 * MiB) + 2 * MiB;
	return v;
}
