/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-uffd.h - userfaultfd wrappers for the host role, and the constants that
 * Debian 12's kernel headers (6.1) lack but newer kernels have.
 */
#ifndef FAM_UFFD_H
#define FAM_UFFD_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/userfaultfd.h>

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFDIO_POISON
/* Linux 6.6: a missing page made to raise SIGBUS (Debian 12 lacks it). */
struct uffdio_poison {
	struct uffdio_range range;
#define UFFDIO_POISON_MODE_DONTWAKE ((__u64)1 << 0)
	__u64 mode;
	__s64 updated;
};
#define _UFFDIO_POISON 0x08
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif
#ifndef UFFDIO_CONTINUE_MODE_WP
/* Linux 6.4: UFFDIO_CONTINUE maps the pages write-protected. */
#define UFFDIO_CONTINUE_MODE_WP ((__u64)1 << 1)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

uint64_t uffd_kernel_features(char **cause);
int uffd_api(int uffd, uint64_t features);
bool uffd_continue_wp_works(void);
int uffd_register(int uffd, uint64_t addr, uint64_t len, bool wp, bool minor);
int uffd_copy(int uffd, uint64_t dst, const void *src, uint64_t len, bool wp);
int uffd_continue(int uffd, uint64_t dst, uint64_t len, bool wp);
int uffd_wake(int uffd, uint64_t addr, uint64_t len);
int uffd_protect(int uffd, uint64_t addr, uint64_t len, bool wp);
int uffd_poison(int uffd, uint64_t addr, uint64_t len);

#endif /* FAM_UFFD_H */
