/*
 * The one hash the shim and the fake driver use for pointers and handles:
 * MurmurHash3's 64-bit finaliser. Addresses share their low bits (alignment)
 * and high bits (one mapping), so an open-addressing table indexed by them
 * directly would pile every key into a few buckets.
 */
#ifndef GS_HASH_H
#define GS_HASH_H

#include <stdint.h>

static inline uint64_t gs_mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

#endif
