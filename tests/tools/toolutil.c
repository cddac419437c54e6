/* SPDX-License-Identifier: Apache-2.0 */
/*
 * toolutil.c - helpers shared by the test programs of tests/tools.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolutil.h"

/* Parses a size with an optional K, M or G suffix; 0 when malformed. */
size_t
tool_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	case 'M':
	case 'm':
		v <<= 20;
		end++;
		break;
	case 'G':
	case 'g':
		v <<= 30;
		end++;
		break;
	}
	return end == s || *end != '\0' ? 0 : (size_t)v;
}

/*
 * Tells whether the mapping holding p has both VmFlags want0 and want1
 * (" um": registered with userfaultfd): 1 or 0, -1 when /proc/self/smaps
 * cannot be read.
 */
int
tool_vmflags(const void *p, const char *want0, const char *want1)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	uintptr_t lo, hi, a = (uintptr_t)p;
	bool in = false;
	int found = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = a >= lo && a < hi;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			found = strstr(line, want0) != NULL &&
			    strstr(line, want1) != NULL;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Tells whether p lies in a mapping registered with userfaultfd (famd's). */
bool
tool_is_fam(const void *p)
{
	return tool_vmflags(p, " um", " um") == 1;
}
