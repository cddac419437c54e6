/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_restart.c - a program outlives a restart of the host famd
 * (host-restart.c, host-reclaim.c): the kernel's side of it on a real
 * userfaultfd and memfd, then a host role stopped and started again in
 * this process (a memory role beside it) while the suite, the program,
 * keeps its userfaultfd and arena memfd and takes its session back.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "host/host.h"
#include "wire/fdpass.h"
#include "unit.h"

#define PAGE   4096u
#define REGION (4u << 20) /* four times the host's buffer */

/* ---- the kernel: a fault waits while a copy of the uffd is kept ---- */

/* A thread reading the first word of a page. */
struct reader {
	volatile uint64_t *p;
	uint64_t got;
	atomic_bool done;
};

/* Reads r->p, then says so. */
static void *
reader_main(void *arg)
{
	struct reader *r = arg;

	r->got = *r->p;
	atomic_store(&r->done, true);
	return NULL;
}

/* Sleeps ms milliseconds. */
static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * A shmem mapping registered for missing faults on a new userfaultfd;
 * returns the uffd, the mapping in *mem.
 */
static int
uffd_shmem(uint8_t **mem)
{
	struct uffdio_api api = { .api = UFFD_API,
		.features = UFFD_FEATURE_MISSING_SHMEM };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	int memfd = memfd_create("restart", MFD_CLOEXEC);
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	ck_assert_int_ge(memfd, 0);
	ck_assert_int_ge(uffd, 0);
	ck_assert_int_eq(ftruncate(memfd, 2 * PAGE), 0);
	*mem = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
	    memfd, 0);
	ck_assert_ptr_ne(*mem, MAP_FAILED);
	close(memfd);
	ck_assert_int_eq(ioctl(uffd, UFFDIO_API, &api), 0);
	reg.range.start = (uint64_t)(uintptr_t)*mem;
	reg.range.len = 2 * PAGE;
	ck_assert_int_eq(ioctl(uffd, UFFDIO_REGISTER, &reg), 0);
	return uffd;
}

START_TEST(test_fault_waits_while_the_program_keeps_its_uffd)
{
	static uint8_t page[PAGE] __attribute__((aligned(PAGE)));
	struct reader r = { 0 };
	struct uffdio_copy copy = { 0 };
	uint8_t *mem;
	int uffd = uffd_shmem(&mem), famd_copy = dup(uffd);
	pthread_t t;

	/* famd dies: its copy goes; the program's stays. */
	close(famd_copy);
	r.p = (volatile uint64_t *)mem;
	ck_assert_int_eq(pthread_create(&t, NULL, reader_main, &r), 0);
	sleep_ms(300);
	ck_assert_msg(!atomic_load(&r.done), "the fault did not wait: read "
	    "%#llx", (unsigned long long)r.got);
	/* A new famd, given the program's copy, installs the page. */
	memset(page, 0x5a, sizeof page);
	copy.dst = (uint64_t)(uintptr_t)mem;
	copy.src = (uint64_t)(uintptr_t)page;
	copy.len = PAGE;
	ck_assert_int_eq(ioctl(uffd, UFFDIO_COPY, &copy), 0);
	pthread_join(t, NULL);
	ck_assert_uint_eq(r.got, 0x5a5a5a5a5a5a5a5aull);
	close(uffd);
}
END_TEST

START_TEST(test_fault_reads_zeros_once_no_copy_of_the_uffd_is_left)
{
	struct reader r = { 0 };
	uint8_t *mem;
	int uffd = uffd_shmem(&mem);
	pthread_t t;

	r.p = (volatile uint64_t *)mem;
	ck_assert_int_eq(pthread_create(&t, NULL, reader_main, &r), 0);
	sleep_ms(300);
	ck_assert(!atomic_load(&r.done));
	/* Why the program keeps a copy: without one, the hole reads zeros. */
	close(uffd);
	pthread_join(t, NULL);
	ck_assert_uint_eq(r.got, 0);
}
END_TEST

/* ---- a host role restarted under a program ------------------------- */

static struct event_base *base;
static struct unit_role mem, host;
static char *mem_addr, session[100], state[120];

/* The program: its session, its userfaultfd, its arena and token. */
struct prog {
	struct unit_prog p;
	uint64_t token;
	int memfd;
	uint32_t arena;
	uint8_t *base;
	uint64_t len, off;
};

/* Starts the host role on session (a buffer of 1M, chunks of 64K). */
static void
host_start(void)
{
	char *text = xasprintf("[famd]\nrole = host\nnode_name = unit-host\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n[host]\n"
	    "memory_nodes = %s\nsession_socket = %s\narena_size = 1G\n"
	    "buffer_size = 1M\nchunk_size = 64K\nprefetch = 0\n", unit_dir(),
	    mem_addr, session);

	if (host.d.cfg != NULL) /* the stopped role's, before its struct goes */
		cfg_free(&host.cfg);
	ck_assert_int_eq(unit_role_start(&host, base, ROLE_HOST, text), 0);
	free(text);
}

/* Tells whether the host role reached its memory node. */
static bool
host_node_up(void *arg)
{
	struct host *h = host.d.role_state;

	return h != NULL && h->nodes[0].state == MN_UP;
}

/* A memory role that keeps a lost session's regions 30 s, and a host. */
static void
setup(void)
{
	char *text;

	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	text = xasprintf("[famd]\nrole = memory\nnode_name = unit-mem\n"
	    "secret_file = %s/secret\n[memory]\nlisten = 127.0.0.1:0\n"
	    "capacity = 256M\npreload_dir = %s\nsession_grace = 30s\n",
	    unit_dir(), unit_dir());
	ck_assert_int_eq(unit_role_start(&mem, base, ROLE_MEMORY, text), 0);
	free(text);
	mem_addr = unit_role_listen(&mem, "memory");
	ck_assert_ptr_nonnull(mem_addr);
	snprintf(session, sizeof session, "%s/session.sock", unit_dir());
	snprintf(state, sizeof state, "%s.state", session);
	host_start();
	ck_assert(unit_run_until_arg(base, host_node_up, NULL, 5000));
}

/* Stops both roles. */
static void
teardown(void)
{
	unit_role_stop(&host);
	unit_role_stop(&mem);
	free(mem_addr);
	event_base_free(base);
}

/* Connects and says HELLO; keeps the session's token. */
static void
prog_hello(struct prog *pr)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct fam_smsg m = { .type = FAM_S_HELLO, .a = FAM_SESSION_VERSION };

	pr->p.base = base;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", session);
	pr->p.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(pr->p.fd, 0);
	ck_assert_int_eq(connect(pr->p.fd, (struct sockaddr *)&sun,
	    sizeof sun), 0);
	pr->p.seq = 0;
	ck_assert_int_eq(unit_prog_call(&pr->p, &m, -1, NULL), 0);
	pr->p.chunk = m.a;
	pr->token = m.d;
	ck_assert_uint_ne(pr->token, 0);
}

/* Opens a session and allocates one region, keeping the arena's memfd. */
static void
prog_start(struct prog *pr)
{
	struct fam_smsg m = { .type = FAM_S_UFFD };
	struct stat st;

	memset(pr, 0, sizeof *pr);
	prog_hello(pr);
	pr->p.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	ck_assert_int_ge(pr->p.uffd, 0);
	ck_assert_int_eq(unit_prog_call(&pr->p, &m, pr->p.uffd, NULL), 0);
	m = (struct fam_smsg){ .type = FAM_S_ALLOC, .a = REGION };
	ck_assert_int_eq(unit_prog_call(&pr->p, &m, -1, &pr->memfd), 0);
	ck_assert_int_ge(pr->memfd, 0);
	pr->arena = (uint32_t)m.a;
	pr->off = m.b;
	ck_assert_int_eq(fstat(pr->memfd, &st), 0);
	pr->len = (uint64_t)st.st_size;
	pr->base = mmap(NULL, pr->len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, pr->memfd, 0);
	ck_assert_ptr_ne(pr->base, MAP_FAILED);
	m = (struct fam_smsg){ .type = FAM_S_MAP, .a = pr->arena,
		.b = (uint64_t)(uintptr_t)pr->base };
	ck_assert_int_eq(unit_prog_call(&pr->p, &m, -1, NULL), 0);
}

/* Sessions the host role restored from the state file. */
static json_int_t
restored(void)
{
	json_t *js = host_restart_json(host.d.role_state);
	json_int_t n = json_integer_value(json_object_get(js,
	    "sessions_restored"));

	json_decref(js);
	return n;
}

/* Takes the session back from a new famd: RECLAIM, REARENA; 0 or -errno. */
static int
prog_reclaim(struct prog *pr)
{
	struct fam_smsg m = { .type = FAM_S_RECLAIM, .a = pr->token, .b = 1 };
	int rc;

	close(pr->p.fd);
	prog_hello(pr);
	rc = unit_prog_call(&pr->p, &m, pr->p.uffd, NULL);
	if (rc < 0)
		return rc;
	m = (struct fam_smsg){ .type = FAM_S_REARENA, .a = pr->arena,
		.b = (uint64_t)(uintptr_t)pr->base, .c = pr->len };
	return unit_prog_call(&pr->p, &m, pr->memfd, NULL);
}

/* The program closes everything. */
static void
prog_end(struct prog *pr)
{
	munmap(pr->base, pr->len);
	close(pr->memfd);
	close(pr->p.uffd);
	unit_prog_close(&pr->p);
}

START_TEST(test_stopped_famd_hands_over_and_every_byte_comes_back)
{
	struct prog pr;
	struct host *h;
	struct stat st;
	json_t *js;

	prog_start(&pr);
	ck_assert_uint_eq(unit_pages(base, pr.base + pr.off, REGION, 7, true),
	    0);
	unit_role_stop(&host);
	ck_assert_int_eq(stat(state, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	js = json_load_file(state, 0, NULL);
	ck_assert_ptr_nonnull(js);
	ck_assert_uint_eq(json_array_size(json_object_get(js, "sessions")), 1);
	json_decref(js);

	host_start();
	ck_assert(unit_run_until_arg(base, host_node_up, NULL, 5000));
	h = host.d.role_state;
	ck_assert_uint_eq(h->clients != NULL && h->clients->restored, 1);
	ck_assert_int_eq(prog_reclaim(&pr), 0);
	/* The buffer's chunks were where they are: resident, taken as dirty. */
	ck_assert_uint_gt(h->used, 0);
	ck_assert_uint_eq(h->dirty, h->used);
	ck_assert_uint_eq(unit_pages(base, pr.base + pr.off, REGION, 7, false),
	    0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	prog_end(&pr);
}
END_TEST

/* Reads a whole file into a new string. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = malloc(1 << 20);

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

/* Writes len bytes of buf over path, mode 0600. */
static void
spill(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

START_TEST(test_journal_is_replayed_and_a_torn_last_line_left_out)
{
	struct fam_smsg m = { .type = FAM_S_ALLOC, .a = 1 << 20 };
	struct prog pr;
	struct host *h;
	uint64_t a, b;
	size_t len, lines = 0;
	char *crash;

	prog_start(&pr);
	a = 0;
	for (struct region *r = ((struct host *)host.d.role_state)->clients->
	    regions; r != NULL; r = r->next)
		a = r->handle;
	unit_run_for(base, 200); /* the new session's snapshot */
	ck_assert_int_eq(unit_prog_call(&pr.p, &m, -1, NULL), 0);
	b = m.d;
	m = (struct fam_smsg){ .type = FAM_S_FREE, .a = a };
	ck_assert_int_eq(unit_prog_call(&pr.p, &m, -1, NULL), 0);
	/* The file as a SIGKILL now would leave it, a line half written. */
	crash = slurp(state, &len);
	for (size_t i = 0; i < len; i++)
		lines += crash[i] == '\n';
	ck_assert_uint_ge(lines, 3);
	crash = realloc(crash, len + 32);
	memcpy(crash + len, "{\"s\":\"0000", 10);
	unit_role_stop(&host);
	spill(state, crash, len + 10);
	free(crash);

	host_start();
	ck_assert(unit_run_until_arg(base, host_node_up, NULL, 5000));
	ck_assert_int_eq(restored(), 1);
	ck_assert_int_eq(prog_reclaim(&pr), 0);
	h = host.d.role_state;
	ck_assert_uint_eq(h->clients->nregions, 1);
	ck_assert_uint_eq(h->clients->regions->handle, b);
	prog_end(&pr);
}
END_TEST

START_TEST(test_state_readable_by_others_is_refused)
{
	struct prog pr;
	char refused[200];

	prog_start(&pr);
	unit_role_stop(&host);
	ck_assert_int_eq(chmod(state, 0644), 0);
	host_start();
	snprintf(refused, sizeof refused, "%s.refused", state);
	ck_assert_int_eq(access(refused, F_OK), 0);
	ck_assert_int_eq(restored(), 0);
	ck_assert_int_eq(prog_reclaim(&pr), -ENOENT);
	prog_end(&pr);
}
END_TEST

START_TEST(test_state_with_a_region_outside_its_arena_is_refused)
{
	struct prog pr;
	json_t *js, *r;

	prog_start(&pr);
	unit_role_stop(&host);
	js = json_load_file(state, 0, NULL);
	ck_assert_ptr_nonnull(js);
	r = json_array_get(json_object_get(json_array_get(json_object_get(js,
	    "sessions"), 0), "regions"), 0);
	json_object_set_new(r, "off", json_integer(1ll << 40));
	ck_assert_int_eq(json_dump_file(js, state, 0), 0);
	ck_assert_int_eq(chmod(state, 0600), 0);
	json_decref(js);
	host_start();
	ck_assert_int_eq(restored(), 0);
	ck_assert_int_eq(prog_reclaim(&pr), -ENOENT);
	prog_end(&pr);
}
END_TEST

START_TEST(test_another_process_cannot_take_a_session)
{
	struct prog pr;
	pid_t pid;
	int st;

	prog_start(&pr);
	unit_role_stop(&host);
	host_start();
	ck_assert(unit_run_until_arg(base, host_node_up, NULL, 5000));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* the child knows the token but is not the session's pid */
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		struct fam_smsg m = { .magic = FAM_SESSION_MAGIC,
			.version = FAM_SESSION_VERSION, .type = FAM_S_RECLAIM,
			.a = pr.token, .seq = 1 };
		struct iovec iov = { &m, sizeof m };
		bool truncated;
		int fd = socket(AF_UNIX, SOCK_STREAM, 0), got = -1;

		snprintf(sun.sun_path, sizeof sun.sun_path, "%s", session);
		if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0)
			_exit(2);
		/* no loop here: famd answers from the parent's */
		if (fdpass_send(fd, &iov, 1, pr.p.uffd, 0) != sizeof m ||
		    fdpass_recv(fd, &m, sizeof m, &got, &truncated,
		    MSG_WAITALL) != sizeof m)
			_exit(3);
		_exit(m.status == EPERM ? 0 : 4);
	}
	while (waitpid(pid, &st, WNOHANG) == 0)
		unit_run_for(base, 10);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	ck_assert_int_eq(prog_reclaim(&pr), 0);
	prog_end(&pr);
}
END_TEST

/* The suite. */
static Suite *
restart_suite(void)
{
	Suite *s = suite_create("host_restart");
	TCase *k = tcase_create("kernel"), *t = tcase_create("restart");

	tcase_add_test(k, test_fault_waits_while_the_program_keeps_its_uffd);
	tcase_add_test(k,
	    test_fault_reads_zeros_once_no_copy_of_the_uffd_is_left);
	suite_add_tcase(s, k);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t,
	    test_stopped_famd_hands_over_and_every_byte_comes_back);
	tcase_add_test(t,
	    test_journal_is_replayed_and_a_torn_last_line_left_out);
	tcase_add_test(t, test_state_readable_by_others_is_refused);
	tcase_add_test(t,
	    test_state_with_a_region_outside_its_arena_is_refused);
	tcase_add_test(t, test_another_process_cannot_take_a_session);
	suite_add_tcase(s, t);
	return s;
}

/* Runs the suite. */
int
main(void)
{
	SRunner *sr = srunner_create(restart_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
