/*
 * Per-process tables of live allocations (pointer or handle -> bytes charged),
 * so each free credits exactly what was charged, exactly once. Striped
 * open-addressing hash tables with spin locks: an insert or a removal costs a
 * few nanoseconds and threads rarely meet on a stripe.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "shim_internal.h"

#define STRIPES 64
#define INITIAL_CAP 64

struct stripe {
	int lock;
	unsigned bits; /* capacity = 1 << bits */
	size_t len;
	struct gs_entry *cells;
} __attribute__((aligned(64)));

struct gs_table {
	struct stripe s[STRIPES];
};

static inline void spin_lock(int *l)
{
	for (int i = 0; __atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE); i++) {
		while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
			if (++i > 64)
				sched_yield(); /* the holder may be descheduled */
			else
				__builtin_ia32_pause();
		}
	}
}

static inline void spin_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* static storage: usable before any constructor has run, no malloc */
static struct gs_table tables[GS_NTABLES];

struct gs_table *gs_table_at(int i)
{
	return &tables[i];
}

static inline struct stripe *stripe_of(struct gs_table *t, uint64_t h) { return &t->s[h & (STRIPES - 1)]; }

static inline size_t home(const struct stripe *s, uint64_t h) { return (size_t)(h >> 6) & (((size_t)1 << s->bits) - 1); }

static void raw_put(struct stripe *s, const struct gs_entry *e, uint64_t h)
{
	size_t mask = ((size_t)1 << s->bits) - 1;
	for (size_t i = home(s, h);; i = (i + 1) & mask) {
		if (s->cells[i].key == e->key) {
			s->cells[i] = *e;
			return;
		}
		if (s->cells[i].key == 0) {
			s->cells[i] = *e;
			s->len++;
			return;
		}
	}
}

static int grow(struct stripe *s)
{
	unsigned bits = s->cells ? s->bits + 1 : 6;
	struct gs_entry *old = s->cells;
	size_t oldcap = old ? (size_t)1 << s->bits : 0;
	struct gs_entry *cells = calloc((size_t)1 << bits, sizeof *cells);
	if (!cells)
		return -1;
	s->cells = cells;
	s->bits = bits;
	s->len = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].key)
			raw_put(s, &old[i], gs_mix64(old[i].key));
	free(old);
	return 0;
}

void gs_table_put(struct gs_table *t, const struct gs_entry *e)
{
	uint64_t h = gs_mix64(e->key);
	struct stripe *s = stripe_of(t, h);
	spin_lock(&s->lock);
	if ((!s->cells || (s->len + 1) * 2 > ((size_t)1 << s->bits)) && grow(s) != 0 && !s->cells) {
		spin_unlock(&s->lock);
		gs_log("out of host memory for the allocation table; an allocation will not be credited on free");
		return;
	}
	raw_put(s, e, h);
	spin_unlock(&s->lock);
}

/* Removes cell i, shifting later cells of the probe chain back (no tombstones). */
static void remove_at(struct stripe *s, size_t i)
{
	size_t mask = ((size_t)1 << s->bits) - 1;
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (s->cells[j].key == 0)
			break;
		size_t k = home(s, gs_mix64(s->cells[j].key));
		/* move j to i if its home is not cyclically within (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			s->cells[i] = s->cells[j];
			i = j;
		}
	}
	s->cells[i].key = 0;
	s->len--;
}

static bool lookup(struct gs_table *t, uint64_t key, struct gs_entry *out, bool take)
{
	if (!key)
		return false;
	uint64_t h = gs_mix64(key);
	struct stripe *s = stripe_of(t, h);
	bool found = false;
	spin_lock(&s->lock);
	if (s->cells) {
		size_t mask = ((size_t)1 << s->bits) - 1;
		for (size_t i = home(s, h); s->cells[i].key; i = (i + 1) & mask) {
			if (s->cells[i].key == key) {
				if (out)
					*out = s->cells[i];
				if (take)
					remove_at(s, i);
				found = true;
				break;
			}
		}
	}
	spin_unlock(&s->lock);
	return found;
}

bool gs_table_take(struct gs_table *t, uint64_t key, struct gs_entry *out) { return lookup(t, key, out, true); }
bool gs_table_get(struct gs_table *t, uint64_t key, struct gs_entry *out) { return lookup(t, key, out, false); }

uint64_t gs_table_sweep(struct gs_table *t, uint64_t aux, uint32_t kinds_mask, uint64_t *count)
{
	uint64_t bytes = 0, n = 0;
	for (int k = 0; k < STRIPES; k++) {
		struct stripe *s = &t->s[k];
		spin_lock(&s->lock);
		if (s->cells) {
			size_t cap = (size_t)1 << s->bits;
			for (size_t i = 0; i < cap;) {
				struct gs_entry *e = &s->cells[i];
				if (e->key && e->aux == aux && ((1u << e->kind) & kinds_mask)) {
					bytes += e->size;
					n++;
					remove_at(s, i); /* a later cell may have moved into i */
					continue;
				}
				i++;
			}
		}
		spin_unlock(&s->lock);
	}
	if (count)
		*count = n;
	return bytes;
}

/* after fork, in the child: no malloc, no waiting on the parent's threads */
static void table_reset(struct gs_table *t)
{
	for (int k = 0; k < STRIPES; k++) {
		struct stripe *s = &t->s[k];
		s->lock = 0;
		if (s->cells)
			memset(s->cells, 0, ((size_t)1 << s->bits) * sizeof *s->cells);
		s->len = 0;
	}
}

/* The parent's allocations are not the child's. */
void gs_tables_after_fork(void)
{
	for (int i = 0; i < GS_NTABLES; i++)
		table_reset(&tables[i]);
}
