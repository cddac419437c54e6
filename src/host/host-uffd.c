/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-uffd.c - userfaultfd wrappers: feature probing, registration, installs
 * (UFFDIO_COPY of a buffer, UFFDIO_CONTINUE of pages already in the
 * arena's memfd) that cope with partly present ranges, wake-ups and write
 * protection.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/famd.h"
#include "host/host-uffd.h"

#define PAGE 4096u

/* Opens a userfaultfd of famd's own (-1 with errno when there is none). */
static int
uffd_open(void)
{
	int fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK |
		    UFFD_USER_MODE_ONLY);
	if (fd < 0) {
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

		if (dev >= 0) {
			fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC |
			    O_NONBLOCK);
			close(dev);
		}
	}
	return fd;
}

/*
 * Returns the features the running kernel offers, from a throw-away
 * userfaultfd asked for none (asking for one the kernel lacks would fail
 * the whole handshake). Returns 0 with *cause when there is no userfaultfd.
 */
uint64_t
uffd_kernel_features(char **cause)
{
	struct uffdio_api api = { .api = UFFD_API, .features = 0 };
	int fd = uffd_open();

	if (fd < 0) {
		*cause = xasprintf("userfaultfd: %s", strerror(errno));
		return 0;
	}
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		*cause = xasprintf("UFFDIO_API: %s", strerror(errno));
		close(fd);
		return 0;
	}
	close(fd);
	return api.features;
}

/* Performs the API handshake on a program's userfaultfd. */
int
uffd_api(int uffd, uint64_t features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };

	if (ioctl(uffd, UFFDIO_API, &api) < 0)
		return -errno;
	return 0;
}

/*
 * Tells whether this kernel maps shmem pages already in the page cache
 * write-protected with UFFDIO_CONTINUE (minor faults of shmem, Linux 5.13;
 * UFFDIO_CONTINUE_MODE_WP, Linux 6.4), tried on a page of a memfd of
 * famd's own, mapped twice: filled through one mapping, installed in the
 * other.
 */
bool
uffd_continue_wp_works(void)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_MINOR_SHMEM |
		    UFFD_FEATURE_WP_HUGETLBFS_SHMEM,
	};
	uint8_t *fill = MAP_FAILED, *user = MAP_FAILED;
	bool ok = false;
	int fd = -1, uffd = uffd_open();

	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0)
		goto out;
	fd = memfd_create("famd-probe", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, PAGE) < 0)
		goto out;
	fill = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	user = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fill == MAP_FAILED || user == MAP_FAILED ||
	    uffd_register(uffd, (uint64_t)(uintptr_t)user, PAGE, true,
	    true) < 0)
		goto out;
	fill[0] = 1;
	ok = uffd_continue(uffd, (uint64_t)(uintptr_t)user, PAGE, true) == 0;
out:
	if (user != MAP_FAILED)
		munmap(user, PAGE);
	if (fill != MAP_FAILED)
		munmap(fill, PAGE);
	if (fd >= 0)
		close(fd);
	if (uffd >= 0)
		close(uffd);
	return ok;
}

/*
 * Registers [addr, addr + len) for missing faults, write-protect faults
 * (wp), and minor faults (minor: a page in the memfd's page cache that the
 * program has not mapped).
 */
int
uffd_register(int uffd, uint64_t addr, uint64_t len, bool wp, bool minor)
{
	struct uffdio_register reg = {
		.range = { .start = addr, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING |
		    (wp ? UFFDIO_REGISTER_MODE_WP : 0) |
		    (minor ? UFFDIO_REGISTER_MODE_MINOR : 0),
	};

	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		return -errno;
	if (!(reg.ioctls & ((uint64_t)1 << _UFFDIO_COPY)))
		return -EOPNOTSUPP;
	if (minor && !(reg.ioctls & ((uint64_t)1 << _UFFDIO_CONTINUE)))
		return -EOPNOTSUPP;
	return 0;
}

#define INSTALL_WP       0x1 /* write-protected */
#define INSTALL_DONTWAKE 0x2 /* waiting threads stay asleep */

/*
 * One UFFDIO_COPY of n bytes from src to dst, or UFFDIO_CONTINUE of
 * [dst, dst + n) when src is NULL. Returns the ioctl's result (errno set);
 * *moved is the kernel's count of bytes done, or its -errno.
 */
static int
install_once(int uffd, uint64_t dst, const uint8_t *src, uint64_t n,
    unsigned how, int64_t *moved)
{
	bool wp = how & INSTALL_WP, dontwake = how & INSTALL_DONTWAKE;
	int rc;

	if (src != NULL) {
		struct uffdio_copy cp = {
			.dst = dst, .src = (uint64_t)(uintptr_t)src, .len = n,
			.mode = (wp ? UFFDIO_COPY_MODE_WP : 0) |
			    (dontwake ? UFFDIO_COPY_MODE_DONTWAKE : 0),
		};

		rc = ioctl(uffd, UFFDIO_COPY, &cp);
		*moved = cp.copy;
	} else {
		struct uffdio_continue ct = {
			.range = { .start = dst, .len = n },
			.mode = (wp ? UFFDIO_CONTINUE_MODE_WP : 0) |
			    (dontwake ? UFFDIO_CONTINUE_MODE_DONTWAKE : 0),
		};

		rc = ioctl(uffd, UFFDIO_CONTINUE, &ct);
		*moved = ct.mapped;
	}
	return rc;
}

/*
 * Installs [dst, dst + len): copied from src, or (src NULL) mapped from the
 * arena's memfd, where famd filled it; how: INSTALL_*. Pages
 * already present are skipped (EEXIST); a partial install (EAGAIN) goes on
 * from where it stopped. A range the program split into several mappings
 * (madvise, mprotect, mlock or munmap of part of a block) fails with
 * ENOENT as a whole: it then goes a page at a time, and a page no
 * registered mapping holds any more is skipped. Threads waiting anywhere
 * in the range are woken (unless INSTALL_DONTWAKE: *skipped then says
 * whether a page was skipped, a thread waiting there to be woken by the
 * caller). Returns 0 or -errno (ESRCH: the program is gone; EFAULT: a page
 * is not in the memfd).
 */
static int
uffd_install(int uffd, uint64_t dst, const uint8_t *src, uint64_t len,
    unsigned how, bool *skipped_out)
{
	uint64_t done = 0;
	bool skipped = false, pagewise = false;
	unsigned retries = 0;

	while (done < len) {
		uint64_t n = pagewise ? PAGE : len - done;
		int64_t moved = 0;

		if (install_once(uffd, dst + done, src != NULL ? src + done :
		    NULL, n, how, &moved) == 0) {
			done += n;
			continue;
		}
		if (errno == EAGAIN && moved > 0) {
			done += (uint64_t)moved;
			continue;
		}
		if (errno == EEXIST || (errno == EAGAIN && moved == -EEXIST) ||
		    (errno == ENOENT && pagewise)) {
			done += PAGE;
			skipped = true;
			continue;
		}
		if (errno == ENOENT && !pagewise) {
			pagewise = true; /* the range spans mappings */
			continue;
		}
		if (errno == EAGAIN && ++retries < 1000)
			continue; /* the program's address space changed */
		return -errno;
	}
	if (skipped_out != NULL)
		*skipped_out = skipped;
	if (skipped && !(how & INSTALL_DONTWAKE))
		return uffd_wake(uffd, dst, len);
	return 0;
}

/*
 * Installs [dst, dst + len) writable: write-protected first, with no thread
 * woken, then the protection lifted, which wakes them. No page is ever
 * writable in a range not wholly in place: an install cut short (famd
 * killed in the ioctl, or an error) leaves write-protected pages only,
 * which nobody wrote (what host-reclaim.c takes for granted when it
 * punches them); a writable page of a partial install could hold a write
 * that the punch would throw away. A single page is in place whole or not
 * at all: it goes in writable in one ioctl (a fault on a grain of a page).
 */
static int
uffd_install_writable(int uffd, uint64_t dst, const uint8_t *src,
    uint64_t len)
{
	bool skipped = false;
	int rc;

	if (len == PAGE)
		return uffd_install(uffd, dst, src, len, 0, NULL);
	rc = uffd_install(uffd, dst, src, len, INSTALL_WP | INSTALL_DONTWAKE,
	    &skipped);

	/*
	 * Protection that stays (the install cut short, or the lift failed)
	 * is safe: a write to it faults, and famd lifts it then. A page
	 * skipped (present already, or unmapped: a lift page by page skips it
	 * too) is woken here, its thread to fault again or go on.
	 */
	if (rc < 0 || uffd_protect(uffd, dst, len, false) < 0 || skipped)
		uffd_wake(uffd, dst, len);
	return rc;
}

/* Installs len bytes from src at the program's dst (uffd_install). */
int
uffd_copy(int uffd, uint64_t dst, const void *src, uint64_t len, bool wp)
{
	if (!wp)
		return uffd_install_writable(uffd, dst, src, len);
	return uffd_install(uffd, dst, src, len, INSTALL_WP, NULL);
}

/*
 * Maps the pages of [dst, dst + len), which famd filled in the arena's
 * memfd, into the program (uffd_install).
 */
int
uffd_continue(int uffd, uint64_t dst, uint64_t len, bool wp)
{
	if (!wp)
		return uffd_install_writable(uffd, dst, NULL, len);
	return uffd_install(uffd, dst, NULL, len, INSTALL_WP, NULL);
}

/* Wakes threads waiting on faults in [addr, addr + len). */
int
uffd_wake(int uffd, uint64_t addr, uint64_t len)
{
	struct uffdio_range r = { .start = addr, .len = len };

	if (ioctl(uffd, UFFDIO_WAKE, &r) < 0)
		return -errno;
	return 0;
}

/*
 * Sets (wp) or lifts write protection on a range, waking writers. A range
 * the program split into several mappings fails with ENOENT as a whole on
 * kernels before 6.5: it is then done a page at a time, and a page no
 * registered mapping holds any more is skipped.
 */
int
uffd_protect(int uffd, uint64_t addr, uint64_t len, bool wp)
{
	struct uffdio_writeprotect w = {
		.range = { .start = addr, .len = len },
		.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	if (ioctl(uffd, UFFDIO_WRITEPROTECT, &w) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	for (uint64_t off = 0; off < len; off += PAGE) {
		w.range.start = addr + off;
		w.range.len = PAGE;
		if (ioctl(uffd, UFFDIO_WRITEPROTECT, &w) < 0 && errno != ENOENT)
			return -errno;
	}
	return 0;
}

/*
 * Poisons the missing pages of [addr, addr + len) (Linux 6.6): a touch
 * there raises SIGBUS in the kernel, without a fault message, until the
 * page is punched out; threads waiting on a poisoned page are woken.
 * Returns 0, or -EEXIST when some page could not be poisoned (present, or
 * holding a write-protect marker) and the rest were, or -errno.
 */
int
uffd_poison(int uffd, uint64_t addr, uint64_t len)
{
	uint64_t done = 0;
	bool skipped = false;

	while (done < len) {
		struct uffdio_poison p = {
			.range = { .start = addr + done, .len = len - done },
		};

		if (ioctl(uffd, UFFDIO_POISON, &p) == 0) {
			done = len;
			break;
		}
		if (errno == EAGAIN && p.updated > 0) {
			done += (uint64_t)p.updated;
			continue;
		}
		if (errno == EEXIST || (errno == EAGAIN &&
		    p.updated == -EEXIST)) {
			done += PAGE - ((addr + done) & (PAGE - 1));
			skipped = true;
			continue;
		}
		return -errno;
	}
	return skipped ? -EEXIST : 0;
}
