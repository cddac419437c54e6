/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz.h - what every libFuzzer target of tests/fuzz/ shares.
 */
#ifndef FAMD_FUZZ_H
#define FAMD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points (Initialize is optional). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Stops the run when famd breaks one of its promises: libFuzzer reports a
 * crash and keeps the input.
 */
#define fuzz_assert(cond) do {						\
	if (!(cond))							\
		__builtin_trap();					\
} while (0)

#endif /* FAMD_FUZZ_H */
