/*
 * Helpers shared by the allocation wrappers (alloc_*.c, context.c). Every
 * allocation path follows one pattern: charge the budget before asking the
 * driver, credit it back when the driver fails, record what was charged so
 * that the free credits exactly that, exactly once.
 */
#ifndef GS_ALLOC_H
#define GS_ALLOC_H

#include "shim_internal.h"

#define T_LINEAR gs_table_at(GS_T_LINEAR)
#define T_ARRAY gs_table_at(GS_T_ARRAY)
#define T_VMM gs_table_at(GS_T_VMM)
#define T_CTX gs_table_at(GS_T_CTX)

/* UINT64_MAX on overflow: a size that cannot be charged. */
static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	uint64_t r;
	if (__builtin_add_overflow(v, a - 1, &r))
		return UINT64_MAX;
	return r / a * a;
}

static inline uint64_t current_ctx(void)
{
	CUcontext c = NULL;
	__typeof__(&cuCtxGetCurrent) f = REAL(cuCtxGetCurrent);
	if (f)
		f(&c);
	return (uint64_t)(uintptr_t)c;
}

static inline bool is_device_location(const CUmemLocation *l) { return l->type == CU_MEM_LOCATION_TYPE_DEVICE; }

/* Records a charged allocation in table t. */
static inline void record(struct gs_table *t, uint64_t key, uint64_t size, uint64_t aux, uint32_t kind)
{
	struct gs_entry e = {.key = key, .size = size, .aux = aux, .kind = kind};
	gs_table_put(t, &e);
	gs_note_live(1);
}

/* Credits a freed entry of the linear table: a pool allocation goes back to
 * its pool (alloc_pool.c), anything else to the budget. */
void gs_linear_freed(const struct gs_entry *e);
void gs_pool_freed(const struct gs_entry *e);

/* The answer to a pre-CUDA-3.2 entry point while a limit is enforced. */
CUresult gs_legacy_refused(const char *name);

#endif
