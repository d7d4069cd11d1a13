/*
 * Messages on stderr, one write(2) each: stdio's buffers would be
 * duplicated by fork.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "shim_internal.h"

static void vlog(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "gpuslice[%d]: ", (int)getpid());
	int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
	buf[len++] = '\n';
	ssize_t w = write(2, buf, len);
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
