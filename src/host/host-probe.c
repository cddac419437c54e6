/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-probe.c - what the kernel's userfaultfd offers, the features famd
 * asks for on each program's userfaultfd (h->uffd_features, wp_ok,
 * poison_ok, cont_ok), and the handshake on a program's userfaultfd.
 * Owns nothing after start; called by the role at start and by the
 * sessions when a program hands its userfaultfd over.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "host/host.h"
#include "host/host-uffd.h"

/*
 * Chooses how chunks are installed (install = continue where the kernel
 * and the transport allow it); adds the features that needs to *need.
 */
static void
uffd_probe_install(struct host *h, uint64_t have, uint64_t *need)
{
	if (cfg_int(h->d->cfg, CFG_HOST_INSTALL) != CFG_INSTALL_CONTINUE)
		return;
	if (cfg_int(h->d->cfg, CFG_TRANSPORT) != CFG_TRANSPORT_TCP) {
		log_info("install = continue: verbs reads land in registered "
		    "staging buffers; chunks are copied in (UFFDIO_COPY)");
		return;
	}
	if (!(have & UFFD_FEATURE_MINOR_SHMEM) || !uffd_continue_wp_works()) {
		log_info("install = continue: this kernel cannot map shmem "
		    "pages write-protected with UFFDIO_CONTINUE (Linux 6.4); "
		    "chunks are copied in (UFFDIO_COPY)");
		return;
	}
	*need |= UFFD_FEATURE_MINOR_SHMEM;
	h->cont_ok = true;
}

/* Probes the kernel's userfaultfd and chooses the features famd asks for. */
int
host_uffd_probe(struct host *h, char **cause)
{
	uint64_t have = uffd_kernel_features(cause);
	uint64_t need = UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_THREAD_ID |
	    UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM;

	if (have == 0)
		return -1;
	if ((have & need) != need) {
		*cause = xasprintf("this kernel's userfaultfd lacks features "
		    "famd needs (have %#llx, need %#llx: shmem missing faults, "
		    "thread ids and write protection of shmem, Linux 5.19 or "
		    "later)", (unsigned long long)have,
		    (unsigned long long)need);
		return -1;
	}
	if ((have & UFFD_FEATURE_POISON) &&
	    cfg_int(h->d->cfg, CFG_HOST_UFFD_POISON)) {
		need |= UFFD_FEATURE_POISON;
		h->poison_ok = true;
	}
	uffd_probe_install(h, have, &need);
	h->uffd_features = need;
	h->wp_ok = true;
	log_info("userfaultfd: kernel features %#llx; using %#llx",
	    (unsigned long long)have, (unsigned long long)need);
	return 0;
}

/* Does the API handshake on a program's userfaultfd. */
int
host_uffd_setup(struct host *h, int uffd, char **cause)
{
	int rc = uffd_api(uffd, h->uffd_features);

	if (rc < 0) {
		*cause = xasprintf("UFFDIO_API on the program's userfaultfd: %s",
		    strerror(-rc));
		return -1;
	}
	if (fd_set_nonblock(uffd) < 0) {
		*cause = xasprintf("userfaultfd: %s", strerror(errno));
		return -1;
	}
	return 0;
}
