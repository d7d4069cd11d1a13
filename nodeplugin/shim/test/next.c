/*
 * dlsym(RTLD_NEXT, ...) must keep meaning "after the caller" with the shim's
 * dlsym in between. Built three times: NEXT_BASE is the definition an
 * interposer chains to; NEXT_MID is an interposer (a library loaded after the
 * preloaded shim); neither defined: the program, which prints 11 when the
 * chain works and -1 when RTLD_NEXT resolved from the wrong place.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#if defined(NEXT_BASE)
int gs_next_fn(void) { return 1; }
#elif defined(NEXT_MID)
int gs_next_fn(void)
{
	int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "gs_next_fn");
	return next && next != gs_next_fn ? 10 + next() : -1;
}
#else
int gs_next_fn(void);
int main(void)
{
	printf("%d\n", gs_next_fn());
	return 0;
}
#endif
