/* SPDX-License-Identifier: Apache-2.0 */
/*
 * confgen.c - writes the example famd.conf files and the key list of
 * famd.conf(5) from the key table. The examples are checked in under conf/
 * (make update-conf writes them, tests/lint/conf.sh compares); the man page
 * is written at build time.
 *
 *   famd-confgen example ROLE           an example file for ROLE
 *   famd-confgen man TEMPLATE           TEMPLATE with @CFG_KEYS@ filled in
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/famd.h"

/* Writes an example file or famd.conf(5), as the arguments ask. */
int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "example") == 0) {
		for (int r = 0; r < ROLE_COUNT; r++)
			if (strcmp(argv[2], cfg_role_names[r]) == 0) {
				cfg_write_example(stdout, (enum famd_role)r);
				return 0;
			}
		fprintf(stderr, "famd-confgen: unknown role %s\n", argv[2]);
		return 1;
	}
	if (argc == 3 && strcmp(argv[1], "man") == 0) {
		FILE *f = fopen(argv[2], "r");
		char line[1024];

		if (f == NULL) {
			perror(argv[2]);
			return 1;
		}
		while (fgets(line, sizeof line, f) != NULL) {
			if (strcmp(line, "@CFG_KEYS@\n") == 0)
				cfg_write_man_keys(stdout);
			else
				fputs(line, stdout);
		}
		fclose(f);
		return 0;
	}
	fprintf(stderr, "usage: famd-confgen example ROLE | man TEMPLATE\n");
	return 1;
}
