/*
 * Configuration: what the environment asks (GPUSLICE_*, see
 * include/gpuslice.h), and the effective limits once the limits file is
 * mapped: the file's, made stricter where the environment asks for it. A
 * malformed value is not guessed at: it is kept in gs.cfg.error and
 * allocations are refused with that message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_internal.h"

static int config_parsed;

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
		if (parse_bytes(v, &c->env_ctx_overhead))
			snprintf(c->error, sizeof c->error, "%s=\"%s\" is not a byte count",
				 GPUSLICE_ENV_CONTEXT_OVERHEAD, v);
	}
	v = getenv(GPUSLICE_ENV_ACCOUNTING_DIR);
	snprintf(c->env_dir, sizeof c->env_dir, "%s", v ? v : "");
	__atomic_store_n(&config_parsed, 1, __ATOMIC_RELEASE);
}

void gs_config_load(void)
{
	if (!config_parsed)
		parse_config();
}

/* Each limit is the limits file's unless the environment asks for a
 * stricter one: a lower budget or share, burst off, a shorter window, a
 * larger context charge. */
void gs_config_resolve(const struct gpuslice_limits *l)
{
	gs.limit = l->memory_limit;
	if (gs.cfg.env_limit && gs.cfg.env_limit < gs.limit)
		gs.limit = gs.cfg.env_limit;
	gs.share = l->compute_share;
	if (gs.cfg.env_share && gs.cfg.env_share < gs.share)
		gs.share = gs.cfg.env_share;
	gs.burst = (l->flags & GPUSLICE_FLAG_COMPUTE_BURST) && gs.cfg.env_burst != 0;
	uint32_t w = l->compute_window_ms;
	if (gs.cfg.env_window_ms && gs.cfg.env_window_ms < w)
		w = gs.cfg.env_window_ms;
	gs.window_ns = (uint64_t)w * 1000000ull;
	gs.pacing = gs.share < 100;
	gs.cfg.ctx_overhead = l->context_overhead;
	if (gs.cfg.env_ctx_overhead > gs.cfg.ctx_overhead)
		gs.cfg.ctx_overhead = gs.cfg.env_ctx_overhead;
}
