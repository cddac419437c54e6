/* SPDX-License-Identifier: Apache-2.0 */
/*
 * toolutil.h - what the test programs of tests/tools share: a size parser,
 * the mapping flags of an address, the failure macro. Plain C: the programs
 * run under LD_PRELOAD=libfamshim.so and know nothing of famd.
 */
#ifndef TOOLUTIL_H
#define TOOLUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* Prints "FAIL - message" on stdout and exits 1. */
#define FAIL(...)                                                          \
	do {                                                               \
		printf("FAIL - ");                                         \
		printf(__VA_ARGS__);                                       \
		printf("\n");                                              \
		fflush(stdout);                                            \
		exit(1);                                                   \
	} while (0)

/* An address looked up, never read (GCC would warn of it uninitialized). */
#if defined(__GNUC__) && !defined(__clang__)
#define TOOL_ADDR_ONLY __attribute__((access(none, 1)))
#else
#define TOOL_ADDR_ONLY
#endif

/* The word that belongs at byte offset off of a buffer (pattern seed). */
static inline uint64_t
tool_pat(uint64_t off, uint64_t seed)
{
	uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ull ^ seed;

	x ^= x >> 31;
	return x * 0xbf58476d1ce4e5b9ull;
}

size_t tool_parse_size(const char *s);
int tool_vmflags(const void *p, const char *want0, const char *want1)
    TOOL_ADDR_ONLY;
bool tool_is_fam(const void *p) TOOL_ADDR_ONLY;

#endif /* TOOLUTIL_H */
