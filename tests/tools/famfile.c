/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famfile.c - maps a file preloaded on the memory node with libfam's
 * fam_alloc_file() and checks every byte of it against the same file read
 * here, for the end-to-end tests.
 *
 * usage: famfile [-w SECONDS] shared PATH FILE
 *        famfile [-w SECONDS] private PATH FILE
 *        famfile refuse PATH ERRNO
 *   shared   maps PATH (relative to the memory node's preload_dir) with
 *            FAM_FILE_SHARED, says "mapped", and at each SIGUSR1 checks
 *            every byte against FILE, says "checked" (the first time) and
 *            "done" (the second), then frees it. The bytes past the file's
 *            end up to the region's size must read zero, fam_stat() must
 *            say file and read-only, and a write must raise SIGSEGV.
 *   private  maps PATH with FAM_FILE_PRIVATE, checks every byte, writes a
 *            pattern over the whole copy and checks it, frees it.
 *   refuse   fam_alloc_file(PATH) must fail with errno ERRNO (ENOENT...)
 *            in both modes.
 *   -w SECONDS  how long to wait for each SIGUSR1 (default 30)
 * Prints "ok - what" per check; exits 1 at the first wrong byte or failure.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "famd-client/famd-client.h"

#include "toolutil.h"


#define PAGE 4096u

static unsigned opt_wait = 30;
static sigjmp_buf sig_jmp;

/* Reads all of the local file path; its length goes to *len. */
static uint8_t *
file_read(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0)
		FAIL("%s: %s", path, strerror(errno));
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL)
		FAIL("malloc: %s", strerror(errno));
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

		if (n <= 0)
			FAIL("reading %s: %s", path, n < 0 ? strerror(errno) :
			    "short");
		off += (size_t)n;
	}
	close(fd);
	*len = off;
	return buf;
}

/*
 * Checks that p holds want (len bytes) and zeros after it up to size, the
 * region's usable size.
 */
static void
check_bytes(const char *what, const uint8_t *p, const uint8_t *want,
    size_t len, size_t size)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != want[i])
			FAIL("%s: byte %zu is %#x, the file has %#x", what, i,
			    p[i], want[i]);
	for (size_t i = len; i < size; i++)
		if (p[i] != 0)
			FAIL("%s: byte %zu past the file's end (%zu) is %#x",
			    what, i, len, p[i]);
}

/* SIGSEGV or SIGBUS: back to the write test. */
static void
on_signal(int sig)
{
	siglongjmp(sig_jmp, 1);
}

/* Tells whether a write of one byte at p raises signal sig. */
static bool
write_faults(volatile uint8_t *p, int sig)
{
	struct sigaction sa = { .sa_handler = on_signal }, old;
	bool faulted = false;

	sigaction(sig, &sa, &old);
	if (sigsetjmp(sig_jmp, 1) == 0)
		*p = (uint8_t)(*p + 1);
	else
		faulted = true;
	sigaction(sig, &old, NULL);
	return faulted;
}

/*
 * Checks the length fam_alloc_file() reported: the file's, or (as the
 * memory node reports it) the file's rounded up to the page size.
 */
static void
check_len(size_t len, size_t flen)
{
	if (len < flen || len > ((flen + PAGE - 1) & ~(size_t)(PAGE - 1)))
		FAIL("fam_alloc_file says %zu bytes, the file has %zu", len,
		    flen);
	if (len != flen)
		printf("note - fam_alloc_file reports %zu bytes for a file of "
		    "%zu: the memory node's page-rounded size\n", len, flen);
}

/* Waits for SIGUSR1 (blocked by main), at most opt_wait seconds. */
static void
wait_usr1(void)
{
	struct timespec ts = { .tv_sec = opt_wait };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (sigtimedwait(&set, NULL, &ts) != SIGUSR1)
		FAIL("no SIGUSR1 within %u s", opt_wait);
}

/* Checks fam_stat() of the region at p. */
static void
check_stat(const void *p, size_t len, unsigned flags)
{
	struct fam_stat st;

	if (fam_stat(p, &st) < 0)
		FAIL("fam_stat: %s", strerror(errno));
	if (st.flags != flags || st.size < len || st.size != fam_usable_size(p))
		FAIL("fam_stat: flags %#x size %zu (usable %zu) for a file of "
		    "%zu bytes; expected flags %#x", st.flags, st.size,
		    fam_usable_size(p), len, flags);
}

/* shared: maps the file read-only, checks it at each SIGUSR1. */
static int
run_shared(const char *path, const char *local)
{
	size_t len, flen, size;
	uint8_t *want = file_read(local, &flen);
	uint8_t *p = fam_alloc_file(path, FAM_FILE_SHARED, &len);

	if (p == NULL)
		FAIL("fam_alloc_file(%s, FAM_FILE_SHARED): %s", path,
		    strerror(errno));
	check_len(len, flen);
	size = fam_usable_size(p);
	check_stat(p, len, FAM_STAT_FILE | FAM_STAT_READONLY);
	printf("mapped %d\n", (int)getpid());
	wait_usr1();
	check_bytes("shared", p, want, flen, size);
	printf("ok - every byte of the shared mapping (%zu) is the file's, "
	    "zeros after it up to %zu\n", flen, size);
	if (!write_faults(p, SIGSEGV) || !write_faults(p + len / 2, SIGSEGV))
		FAIL("a write to the shared (read-only) mapping did not raise "
		    "SIGSEGV");
	printf("ok - writes to the shared mapping raise SIGSEGV\n");
	printf("checked\n");
	wait_usr1();
	check_bytes("shared, again", p, want, flen, size);
	if (fam_free(p) < 0)
		FAIL("fam_free: %s", strerror(errno));
	printf("ok - still the file's bytes; freed\n");
	printf("done\n");
	free(want);
	return 0;
}

/* private: maps a copy, checks it, overwrites it, checks that. */
static int
run_private(const char *path, const char *local)
{
	size_t len, flen, size, end;
	uint8_t *want = file_read(local, &flen);
	uint8_t *p = fam_alloc_file(path, FAM_FILE_PRIVATE, &len);

	if (p == NULL)
		FAIL("fam_alloc_file(%s, FAM_FILE_PRIVATE): %s", path,
		    strerror(errno));
	check_len(len, flen);
	size = fam_usable_size(p);
	check_stat(p, len, FAM_STAT_FILE);
	check_bytes("private", p, want, flen, size);
	printf("ok - every byte of the private copy (%zu) is the file's, "
	    "zeros after it up to %zu\n", flen, size);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(want[i % flen] ^ (i >> 12) ^ 0x5a);
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(want[i % flen] ^ (i >> 12) ^ 0x5a))
			FAIL("private: byte %zu lost what was written", i);
	printf("ok - the private copy is writable: %zu bytes written and read "
	    "back\n", len);
	/*
	 * Past the memory node's copy (a page multiple) and before the end
	 * of the last chunk, a write could not be kept: SIGBUS, not a
	 * write that is lost later.
	 */
	end = (len + PAGE - 1) & ~(size_t)(PAGE - 1);
	if (end < size) {
		if (!write_faults(p + end, SIGBUS))
			FAIL("a write at %zu, past the file's copy (usable "
			    "size %zu), did not raise SIGBUS", end, size);
		check_bytes("private, past the end", p + end,
		    (const uint8_t *)"", 0, size - end);
		printf("ok - a write past the memory node's copy of the file "
		    "(at %zu of %zu) raises SIGBUS\n", end, size);
	}
	if (fam_free(p) < 0)
		FAIL("fam_free: %s", strerror(errno));
	free(want);
	return 0;
}

/* refuse: fam_alloc_file() of path fails with errno want in both modes. */
static int
run_refuse(const char *path, const char *errname)
{
	static const int modes[] = { FAM_FILE_SHARED, FAM_FILE_PRIVATE };
	size_t len;

	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		void *p;
		const char *got;

		errno = 0;
		p = fam_alloc_file(path, modes[i], &len);
		if (p != NULL)
			FAIL("fam_alloc_file(\"%s\") succeeded", path);
		got = strerrorname_np(errno);
		if (got == NULL || strcmp(got, errname) != 0)
			FAIL("fam_alloc_file(\"%s\"): %s, expected %s", path,
			    got != NULL ? got : "?", errname);
	}
	printf("ok - fam_alloc_file(\"%s\") is refused: %s\n", path, errname);
	return 0;
}

/* Runs the mode named on the command line. */
int
main(int argc, char **argv)
{
	sigset_t set;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "w:")) != -1) {
		switch (c) {
		case 'w':
			opt_wait = (unsigned)atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (argc - optind != 3)
		goto usage;
	if (strcmp(argv[optind], "shared") == 0)
		return run_shared(argv[optind + 1], argv[optind + 2]);
	if (strcmp(argv[optind], "private") == 0)
		return run_private(argv[optind + 1], argv[optind + 2]);
	if (strcmp(argv[optind], "refuse") == 0)
		return run_refuse(argv[optind + 1], argv[optind + 2]);
usage:
	fprintf(stderr, "usage: famfile [-w SECONDS] shared|private PATH "
	    "FILE\n       famfile refuse PATH ERRNO\n");
	return 2;
}
