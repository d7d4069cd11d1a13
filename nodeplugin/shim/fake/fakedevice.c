/*
 * Which device the fake driver is: the 32 GiB Tesla V100 of fakegpu.h, or,
 * in a container of a MIG claim on a simulated node, the MIG instance the
 * claim's CDI spec names in the environment (FAKEGPU_MIG_UUID,
 * FAKEGPU_MIG_PROFILE, FAKEGPU_MIG_MEMORY, and its parent GPU's
 * FAKEGPU_NAME, FAKEGPU_UUID, FAKEGPU_COMPUTE_CAPABILITY): what a real
 * driver knows from the hardware the container's device nodes open.
 * FAKEGPU_RESERVED_BYTES is the memory the driver keeps for itself (none
 * unless set).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "fakegpu.h"

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

const char *fake_mig_uuid(void)
{
	const char *v = getenv("FAKEGPU_MIG_UUID");
	return v && *v ? v : NULL;
}

const char *fake_mig_profile(void) { return env_or("FAKEGPU_MIG_PROFILE", "?"); }
const char *fake_name(void) { return env_or("FAKEGPU_NAME", FAKE_NAME); }
const char *fake_uuid(void) { return env_or("FAKEGPU_UUID", FAKE_UUID); }

uint64_t fake_total_mem(void)
{
	const char *v = getenv("FAKEGPU_MIG_MEMORY");
	if (fake_mig_uuid() && v && *v)
		return strtoull(v, NULL, 10);
	return FAKE_TOTAL_MEM;
}

uint64_t fake_reserved_mem(void)
{
	const char *v = getenv("FAKEGPU_RESERVED_BYTES");
	if (fake_mig_uuid() || !v || !*v)
		return 0;
	uint64_t r = strtoull(v, NULL, 10);
	return r < fake_total_mem() ? r : 0;
}

uint64_t fake_usable_mem(void) { return fake_total_mem() - fake_reserved_mem(); }

void fake_compute_capability(int *major, int *minor)
{
	*major = 7;
	*minor = 0;
	const char *v = getenv("FAKEGPU_COMPUTE_CAPABILITY");
	if (v && sscanf(v, "%d.%d", major, minor) != 2) {
		*major = 7;
		*minor = 0;
	}
}

/* CUDA names a MIG device after its GPU and profile */
void fake_device_name(char *out, size_t len)
{
	if (fake_mig_uuid())
		snprintf(out, len, "%s MIG %s", fake_name(), fake_mig_profile());
	else
		snprintf(out, len, "%s", fake_name());
}
