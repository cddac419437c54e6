/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_fault.c - the host's fault service (host-fault.c) on a real
 * userfaultfd: a host role and a memory role run in this process on
 * loopback, the suite is the program (its session, its userfaultfd, the
 * arena memfd mapped here), and a second thread takes the faults while
 * the loop serves them.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "host/host.h"
#include "host/host-uffd.h"
#include "unit.h"

#define CHUNK  (64u << 10)
#define PAGE   4096u

static struct unit_famds u;
static struct unit_prog prog;

/* What a touching thread does: a range of a region, and what it saw. */
struct work {
	volatile uint8_t *p;
	uint64_t len;
	uint64_t seed;
	bool write;
	uint64_t nonzero, wrong; /* pages read not zero, not the pattern */
	uint64_t read;           /* bytes read */
};

/* The pattern word at byte offset off. */
static uint64_t
pattern(uint64_t seed, uint64_t off)
{
	return (off * 0x9e3779b97f4a7c15ull) ^ seed;
}

/* Writes the pattern to the first word of every page, or reads it back. */
static void
touch_pages(void *arg)
{
	struct work *w = arg;

	for (uint64_t off = 0; off < w->len; off += PAGE) {
		volatile uint64_t *q = (volatile uint64_t *)(w->p + off);

		if (w->write) {
			*q = pattern(w->seed, off);
			continue;
		}
		if (*q != 0)
			w->nonzero++;
		if (*q != pattern(w->seed, off))
			w->wrong++;
		w->read += PAGE;
	}
}

/* Runs work w on a second thread; the loop serves its faults. */
static bool
run_work(struct work *w)
{
	struct unit_touch t;

	ck_assert_int_eq(unit_touch_start(&t, touch_pages, w), 0);
	ck_assert_msg(unit_touch_wait(u.base, &t, 30000),
	    "the touching thread is stuck");
	return t.sigbus;
}

/* Returns the host's only region. */
static struct region *
the_region(void)
{
	struct host *h = unit_famds_host(&u);

	ck_assert_ptr_nonnull(h->clients);
	ck_assert_ptr_nonnull(h->clients->regions);
	return h->clients->regions;
}

/* Starts the roles and opens the program's session. */
static void
setup(void)
{
	ck_assert_int_eq(unit_famds_start(&u, NULL), 0);
	ck_assert_int_eq(unit_prog_open(&prog, u.base, u.session), 0);
}

/* As setup(), with chunks read into the arena (install = continue). */
static void
setup_continue(void)
{
	ck_assert_int_eq(unit_famds_start(&u, "install = continue\n"), 0);
	ck_assert_int_eq(unit_prog_open(&prog, u.base, u.session), 0);
}

/* As setup_continue(), reading ahead (runs of chunks in one read). */
static void
setup_continue_prefetch(void)
{
	ck_assert_int_eq(unit_famds_start(&u,
	    "install = continue\nprefetch = 16\n"), 0);
	ck_assert_int_eq(unit_prog_open(&prog, u.base, u.session), 0);
}

/* Ends the session and stops the roles. */
static void
teardown(void)
{
	unit_prog_close(&prog);
	unit_famds_stop(&u);
}

START_TEST(test_never_written_chunk_is_zero_filled_without_a_fetch)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 4 * CHUNK };
	uint8_t *p;
	uint64_t handle;

	ck_assert_int_eq(unit_prog_alloc(&prog, 16 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	ck_assert_uint_eq(w.read, 4 * CHUNK);
	ck_assert_uint_eq(w.nonzero, 0);
	ck_assert_uint_eq(h->stats.zero_fills, 4);
	ck_assert_uint_eq(h->stats.reads, 0);
	ck_assert_uint_eq(h->stats.fetches, 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert_uint_eq(the_region()->resident, 4);
}
END_TEST

START_TEST(test_evicted_dirty_chunk_survives_refault)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 64 * CHUNK, .seed = 0xfeed, .write = true };
	struct region *r;
	uint8_t *p;
	uint64_t handle;

	/* 4 MiB written through a buffer of 1 MiB. */
	ck_assert_int_eq(unit_prog_alloc(&prog, 64 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	r = the_region();
	ck_assert_uint_eq(r->chunks[0].state, CH_ABSENT);
	ck_assert(r->chunks[0].flags & CH_REMOTE);
	ck_assert_uint_gt(h->stats.writebacks, 0);
	w.write = false;
	ck_assert(!run_work(&w));
	ck_assert_uint_eq(w.read, 64 * CHUNK);
	ck_assert_uint_eq(w.wrong, 0);
	ck_assert_uint_gt(h->stats.fetches, 0);
	ck_assert_uint_eq(h->stats.fetch_errors, 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

START_TEST(test_fault_with_memory_node_gone_gets_sigbus_not_bytes)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 64 * CHUNK, .seed = 0xbad, .write = true };
	struct work first = { .len = PAGE, .seed = 0xbad };
	uint8_t *p;
	uint64_t handle;

	ck_assert_int_eq(unit_prog_alloc(&prog, 64 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	ck_assert_uint_eq(the_region()->chunks[0].state, CH_ABSENT);
	unit_role_stop(&u.mem);
	first.p = p;
	ck_assert(run_work(&first)); /* after op_timeout (1s) */
	ck_assert_uint_eq(first.read, 0);
	ck_assert_uint_ge(h->stats.sigbus, 1);
	ck_assert_uint_eq(the_region()->chunks[0].state, CH_ABSENT);
}
END_TEST

START_TEST(test_fault_in_freed_region_gets_sigbus)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 2 * CHUNK, .seed = 7, .write = true };
	struct fam_smsg m = { .type = FAM_S_FREE };
	uint8_t *p;
	uint64_t handle;

	ck_assert_int_eq(unit_prog_alloc(&prog, 2 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	m.a = handle;
	ck_assert_int_eq(unit_prog_call(&prog, &m, -1, NULL), 0);
	w.write = false;
	ck_assert(run_work(&w));
	ck_assert_uint_eq(w.read, 0);
	ck_assert_uint_eq(h->stats.faults_invalid, 1);
	ck_assert_uint_eq(h->stats.sigbus, 1);
}
END_TEST

START_TEST(test_freed_page_touched_twice_is_one_fault_message_when_poisoned)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = PAGE, .seed = 7, .write = true };
	struct fam_smsg m = { .type = FAM_S_FREE };
	uint8_t *p;
	uint64_t handle;

	ck_assert_int_eq(unit_prog_alloc(&prog, 2 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	m.a = handle;
	ck_assert_int_eq(unit_prog_call(&prog, &m, -1, NULL), 0);
	w.write = false;
	ck_assert(run_work(&w));
	ck_assert(run_work(&w)); /* a SIGBUS handler that came back */
	ck_assert_uint_eq(w.read, 0);
	if (h->poison_ok) {
		/* The second touch raised SIGBUS in the kernel: no message. */
		ck_assert_uint_eq(h->stats.faults_invalid, 1);
		ck_assert_uint_eq(h->stats.sigbus_poisoned, 1);
	} else {
		ck_assert_uint_eq(h->stats.faults_invalid, 2);
	}
}
END_TEST

START_TEST(test_refault_of_evicted_chunk_is_one_read_for_all_its_pages)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 64 * CHUNK, .seed = 3, .write = true };
	struct work again = { .len = CHUNK, .seed = 3 };
	uint8_t *p;
	uint64_t handle, reads;

	ck_assert_int_eq(unit_prog_alloc(&prog, 64 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	ck_assert_uint_eq(the_region()->chunks[0].state, CH_ABSENT);
	reads = h->stats.reads;
	again.p = p;
	ck_assert(!run_work(&again));
	ck_assert_uint_eq(again.wrong, 0);
	/* 16 pages of one chunk: one read */
	ck_assert_uint_eq(h->stats.reads - reads, 1);
}
END_TEST

START_TEST(test_continue_install_is_used_where_the_kernel_has_it)
{
	struct host *h = unit_famds_host(&u);

	/* Linux 6.4 and later: UFFDIO_CONTINUE maps write-protected. */
	ck_assert(h->cont_ok == uffd_continue_wp_works());
	ck_assert(!h->cont_ok ||
	    (h->uffd_features & UFFD_FEATURE_MINOR_SHMEM));
}
END_TEST

START_TEST(test_chunks_read_into_the_arena_keep_every_write)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 64 * CHUNK, .seed = 0xc0de, .write = true };
	uint8_t *p;
	uint64_t handle, wb;

	/* 4 MiB through a buffer of 1 MiB, twice: written, read, written. */
	ck_assert_int_eq(unit_prog_alloc(&prog, 64 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	w.write = false;
	ck_assert(!run_work(&w));
	ck_assert_uint_eq(w.wrong, 0);
	/* chunks read in and written again must be written back again */
	wb = h->stats.writebacks;
	w.seed = 0xc0de2;
	w.write = true;
	ck_assert(!run_work(&w));
	w.write = false;
	w.read = 0;
	ck_assert(!run_work(&w));
	ck_assert_uint_eq(w.read, 64 * CHUNK);
	ck_assert_uint_eq(w.wrong, 0);
	ck_assert_uint_gt(h->stats.writebacks, wb);
	ck_assert_uint_gt(h->stats.fetches, 0);
	ck_assert_uint_eq(h->stats.fetch_errors, 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

START_TEST(test_page_zapped_from_the_program_is_mapped_again_with_its_data)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 64 * CHUNK, .seed = 0x2a9, .write = true };
	struct work one = { .len = CHUNK, .seed = 0x2a9 };
	struct region *r;
	uint8_t *p;
	uint64_t handle, stale;

	ck_assert_int_eq(unit_prog_alloc(&prog, 64 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	one.p = p;
	ck_assert(!run_work(&one)); /* chunk 0: read back in */
	r = the_region();
	ck_assert_uint_eq(r->chunks[0].state, CH_RESIDENT);
	/* the program drops its mapping of it; the memfd keeps the pages */
	ck_assert_int_eq(madvise(p, CHUNK, MADV_DONTNEED), 0);
	stale = h->stats.faults_stale;
	one.read = 0;
	ck_assert(!run_work(&one));
	ck_assert_uint_eq(one.read, CHUNK);
	ck_assert_uint_eq(one.wrong, 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	if (h->cont_ok)
		ck_assert_uint_gt(h->stats.faults_stale, stale);
}
END_TEST

START_TEST(test_read_ahead_runs_into_the_arena_arrive_whole)
{
	struct host *h = unit_famds_host(&u);
	struct work w = { .len = 64 * CHUNK, .seed = 0x5e9, .write = true };
	uint8_t *p;
	uint64_t handle;

	ck_assert_int_eq(unit_prog_alloc(&prog, 64 * CHUNK, &p, &handle), 0);
	w.p = p;
	ck_assert(!run_work(&w));
	w.write = false;
	ck_assert(!run_work(&w));
	ck_assert_uint_eq(w.read, 64 * CHUNK);
	ck_assert_uint_eq(w.wrong, 0);
	ck_assert_uint_gt(h->stats.prefetches, 0);
	ck_assert_uint_gt(h->stats.reads_coalesced, 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

/* A lower layer's news: asks the fault service for a kick. */
static void
ask_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	bool *asked = arg;

	host_wake(unit_famds_host(&u), HOST_WAKE_KICK);
	*asked = true;
}

START_TEST(test_wake_asked_in_a_callback_runs_in_the_same_iteration)
{
	struct host *h = unit_famds_host(&u);
	bool asked = false;
	struct event *ev = event_new(u.base, -1, 0, ask_kick_cb, &asked);

	ck_assert_ptr_nonnull(ev);
	event_active(ev, EV_READ, 0);
	event_base_loop(u.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert(asked);
	ck_assert_uint_eq(h->wake_what, 0); /* its callback ran, too */
	event_free(ev);
}
END_TEST

/*
 * A page of this process at p, from /proc/self/pagemap: present (bit 63)
 * and write-protected by userfaultfd (bit 57).
 */
static void
page_state(const void *p, bool *present, bool *wp)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &e, sizeof e,
	    (off_t)((uintptr_t)p / PAGE * sizeof e)), (ssize_t)sizeof e);
	close(fd);
	*present = e >> 63 & 1;
	*wp = e >> 57 & 1;
}

/*
 * What an install test works on: dst, dlen bytes of a memfd mapped shared
 * and registered with uffd (missing and write-protect faults), and src,
 * slen bytes of anonymous memory filled with 0x5a.
 */
struct inst {
	int uffd, memfd;
	uint8_t *dst, *src;
	size_t dlen, slen;
};

static void
inst_open(struct inst *in, size_t dlen, size_t slen)
{
	in->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	in->memfd = memfd_create("check-install", MFD_CLOEXEC);
	in->dlen = dlen;
	in->slen = slen;
	ck_assert_int_ge(in->uffd, 0);
	ck_assert_int_ge(in->memfd, 0);
	ck_assert_int_eq(uffd_api(in->uffd, UFFD_FEATURE_WP_HUGETLBFS_SHMEM),
	    0);
	ck_assert_int_eq(ftruncate(in->memfd, (off_t)dlen), 0);
	in->dst = mmap(NULL, dlen, PROT_READ | PROT_WRITE, MAP_SHARED,
	    in->memfd, 0);
	in->src = mmap(NULL, slen, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(in->dst != MAP_FAILED && in->src != MAP_FAILED);
	memset(in->src, 0x5a, slen);
	ck_assert_int_eq(uffd_register(in->uffd, (uint64_t)(uintptr_t)in->dst,
	    dlen, true, false), 0);
}

static void
inst_close(struct inst *in)
{
	munmap(in->src, in->slen);
	munmap(in->dst, in->dlen);
	close(in->memfd);
	close(in->uffd);
}

/*
 * A chunk that goes in writable but whose install is cut short leaves no
 * page writable: the pages in place stay write-protected (a write there
 * faults and is seen), so that a restarted famd or a failed fetch may punch
 * them without throwing a write away. Cut short here by a source whose
 * second half cannot be read (as a SIGKILL in the ioctl would).
 */
START_TEST(test_writable_install_cut_short_leaves_no_page_writable)
{
	struct inst in;
	unsigned in_place = 0;
	bool present, wp;

	inst_open(&in, 2 * CHUNK, CHUNK);
	/* a whole install goes in writable */
	ck_assert_int_eq(uffd_copy(in.uffd, (uint64_t)(uintptr_t)in.dst,
	    in.src, CHUNK, false), 0);
	for (unsigned i = 0; i < CHUNK / PAGE; i++) {
		page_state(in.dst + i * PAGE, &present, &wp);
		ck_assert(present && !wp);
	}
	/* one cut short: what went in is write-protected */
	ck_assert_int_eq(mprotect(in.src + CHUNK / 2, CHUNK / 2, PROT_NONE), 0);
	ck_assert_int_lt(uffd_copy(in.uffd, (uint64_t)(uintptr_t)in.dst + CHUNK,
	    in.src, CHUNK, false), 0);
	for (unsigned i = 0; i < CHUNK / PAGE; i++) {
		page_state(in.dst + CHUNK + i * PAGE, &present, &wp);
		ck_assert_msg(!present || wp, "page %u of a chunk whose install "
		    "was cut short is writable", i);
		in_place += present;
	}
	ck_assert_uint_gt(in_place, 0); /* (the install went part of the way) */
	inst_close(&in);
}
END_TEST

/* A thread that touched a page, and whether it is through. */
struct wait_touch {
	volatile uint8_t *p;
	atomic_bool ended;
	pthread_t th;
};

/* Reads one byte. */
static void *
wait_touch_main(void *arg)
{
	struct wait_touch *t = arg;

	(void)*t->p;
	atomic_store(&t->ended, true);
	return NULL;
}

/* Starts a thread that reads p, and takes its fault message off uffd. */
static void
wait_touch_start(struct wait_touch *t, int uffd, uint8_t *p)
{
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	struct uffd_msg msg;

	*t = (struct wait_touch){ .p = p };
	ck_assert_int_eq(pthread_create(&t->th, NULL, wait_touch_main, t), 0);
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1); /* it waits */
	ck_assert_int_eq(read(uffd, &msg, sizeof msg), (ssize_t)sizeof msg);
	ck_assert_uint_eq(msg.arg.pagefault.address, (uint64_t)(uintptr_t)p);
}

/* Waits up to 5 s for t's thread to go on, and joins it. */
static void
wait_touch_end(struct wait_touch *t, const char *what)
{
	for (int i = 0; i < 500 && !atomic_load(&t->ended); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	ck_assert_msg(atomic_load(&t->ended), "%s", what);
	pthread_join(t->th, NULL);
}

/*
 * A thread waits on a page of a chunk that the program maps anew before
 * famd's writable install of it comes: the install and the lift of
 * protection skip every page (no registered mapping holds them), and the
 * thread is woken all the same (it faults again, in the new mapping), not
 * left asleep.
 */
START_TEST(test_writable_install_wakes_a_thread_on_a_page_it_skipped)
{
	struct inst in;
	struct wait_touch t;

	inst_open(&in, CHUNK, CHUNK);
	wait_touch_start(&t, in.uffd, in.dst + 5 * PAGE);
	/* mapped anew: not registered, every page skipped */
	ck_assert(mmap(in.dst, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_FIXED, -1, 0) == in.dst);
	ck_assert_int_eq(uffd_copy(in.uffd, (uint64_t)(uintptr_t)in.dst, in.src,
	    CHUNK, false), 0);
	wait_touch_end(&t, "the thread waiting on a page the install skipped "
	    "sleeps on");
	inst_close(&in);
}
END_TEST

/*
 * A single page (a fault's grain, fetch = adaptive) goes in writable in one
 * ioctl, whole or not at all: the thread waiting on it wakes, and the page
 * is in place and writable (no write-protect fault to follow).
 */
START_TEST(test_writable_install_of_one_page_wakes_its_thread)
{
	struct inst in;
	struct wait_touch t;
	bool present, wp;

	inst_open(&in, CHUNK, PAGE);
	wait_touch_start(&t, in.uffd, in.dst + 3 * PAGE);
	ck_assert_int_eq(uffd_copy(in.uffd,
	    (uint64_t)(uintptr_t)(in.dst + 3 * PAGE), in.src, PAGE, false), 0);
	wait_touch_end(&t, "the thread waiting on the page sleeps on");
	page_state(in.dst + 3 * PAGE, &present, &wp);
	ck_assert_msg(present && !wp, "the page is %s",
	    present ? "write-protected" : "not in place");
	ck_assert_uint_eq(in.dst[3 * PAGE + PAGE - 1], 0x5a);
	page_state(in.dst + 4 * PAGE, &present, &wp);
	ck_assert(!present); /* and no other */
	inst_close(&in);
}
END_TEST

/* The suite's tests. */
static Suite *
host_fault_suite(void)
{
	Suite *s = suite_create("host_fault");
	TCase *t = tcase_create("userfaultfd");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_never_written_chunk_is_zero_filled_without_a_fetch);
	tcase_add_test(t, test_evicted_dirty_chunk_survives_refault);
	tcase_add_test(t, test_fault_with_memory_node_gone_gets_sigbus_not_bytes);
	tcase_add_test(t, test_fault_in_freed_region_gets_sigbus);
	tcase_add_test(t,
	    test_freed_page_touched_twice_is_one_fault_message_when_poisoned);
	tcase_add_test(t, test_refault_of_evicted_chunk_is_one_read_for_all_its_pages);
	tcase_add_test(t, test_wake_asked_in_a_callback_runs_in_the_same_iteration);
	tcase_add_test(t, test_page_zapped_from_the_program_is_mapped_again_with_its_data);
	suite_add_tcase(s, t);
	/* the same, with chunks read into the arena (UFFDIO_CONTINUE) */
	t = tcase_create("continue");
	tcase_add_checked_fixture(t, setup_continue, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_continue_install_is_used_where_the_kernel_has_it);
	tcase_add_test(t, test_evicted_dirty_chunk_survives_refault);
	tcase_add_test(t, test_chunks_read_into_the_arena_keep_every_write);
	tcase_add_test(t, test_fault_with_memory_node_gone_gets_sigbus_not_bytes);
	tcase_add_test(t, test_refault_of_evicted_chunk_is_one_read_for_all_its_pages);
	tcase_add_test(t, test_page_zapped_from_the_program_is_mapped_again_with_its_data);
	suite_add_tcase(s, t);
	t = tcase_create("continue_prefetch");
	tcase_add_checked_fixture(t, setup_continue_prefetch, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_read_ahead_runs_into_the_arena_arrive_whole);
	suite_add_tcase(s, t);
	t = tcase_create("install");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_writable_install_cut_short_leaves_no_page_writable);
	tcase_add_test(t, test_writable_install_wakes_a_thread_on_a_page_it_skipped);
	tcase_add_test(t, test_writable_install_of_one_page_wakes_its_thread);
	suite_add_tcase(s, t);
	return s;
}

/* Runs the suite; exits 0 when every test passed. */
int
main(void)
{
	SRunner *sr = srunner_create(host_fault_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
