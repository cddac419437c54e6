/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famearly.c - libfamearly.so, preloaded right after libfamshim.so: its
 * constructor runs before the shim's and allocates a large block through
 * the shim (4 MiB, written), so the program's first fabric-attached
 * memory, and libfam's fork handlers, come before the shim's constructor
 * (as in a program whose libraries allocate in their constructors). With
 * an allocator library behind the shim, such a program's forked child
 * gets its watch from a spare it has not started yet when libfam's child
 * handler runs.
 */
#include <stdlib.h>
#include <string.h>

#define EARLY_SIZE ((size_t)4 << 20)

void *famearly_block;

__attribute__((constructor)) static void
famearly(void)
{
	famearly_block = malloc(EARLY_SIZE);
	if (famearly_block != NULL)
		memset(famearly_block, 0x5a, EARLY_SIZE);
}
