/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-sigbus.c - a fault famd cannot serve raises SIGBUS, never wrong
 * data: the pages poisoned where the kernel can (UFFDIO_POISON), else the
 * thread signalled; a thread that faults on such a page again and again,
 * or of another process, ends its session. Says why in the log.
 * Owns: each session's SIGBUS repeat count (host_client.sigbus_*).
 * Below the fault service, beside the sessions (host_client_alive()).
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "host/host.h"
#include "host/host-uffd.h"

#define PAGE 4096u
#define HOST_SIGBUS_REPEATS 16 /* SIGBUS for one page in a row, at most */

/*
 * Without UFFDIO_POISON: true when tid faulted again on the page famd just
 * sent it SIGBUS for, HOST_SIGBUS_REPEATS times in a row (a SIGBUS
 * handler that returns); the session is then given up.
 */
static bool
sigbus_repeating(struct host_client *cl, pid_t tid, uint64_t page)
{
	if (tid != cl->sigbus_tid || page != cl->sigbus_page) {
		cl->sigbus_tid = tid;
		cl->sigbus_page = page;
		cl->sigbus_repeats = 0;
	}
	return ++cl->sigbus_repeats > HOST_SIGBUS_REPEATS;
}

/*
 * Tells whether the process that connected still lives, from the pidfd
 * taken at accept: its pid then still names it, not a process that got
 * the number since. Without a pidfd (before Linux 5.3), assumed.
 */
bool
host_client_alive(struct host_client *cl)
{
	if (cl->pidfd < 0)
		return true;
	return syscall(SYS_pidfd_send_signal, cl->pidfd, 0, NULL, 0) == 0;
}

/*
 * Makes a fault famd cannot serve raise SIGBUS, and says why: the missing
 * pages of [addr, addr + len) are poisoned where the kernel can (the
 * thread, woken, gets SIGBUS from the kernel, and so does every touch
 * after it, with no fault message); else (or where a page holds a
 * write-protect marker) the thread is sent SIGBUS if it is one of the
 * process that connected (pidfd), and a thread that faults on the same
 * page again and again, or of another process, ends its session.
 * len 0: the page is present (a write-protect fault), nothing to poison.
 */
void
host_sigbus(struct host *h, struct host_client *cl, pid_t tid,
    uint64_t addr, uint64_t len, const char *why)
{
	uint64_t page = addr & ~(uint64_t)(PAGE - 1);

	h->stats.sigbus++;
	log_rl(LOG_WARNING, "pid %ld thread %ld: SIGBUS: %s", (long)cl->pid,
	    (long)tid, why);
	if (h->poison_ok && len > 0 && uffd_poison(cl->uffd, page,
	    ((addr + len + PAGE - 1) & ~(uint64_t)(PAGE - 1)) - page) == 0) {
		for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
			if (ar->uaddr != 0 && page >= ar->uaddr &&
			    page < ar->uaddr + ar->size)
				ar->poisoned = true;
		h->stats.sigbus_poisoned++;
		return;
	}
	if (!host_client_alive(cl))
		return; /* nobody left to signal: not another process */
	if (sigbus_repeating(cl, tid, page)) {
		if (!cl->give_up)
			log_rl(LOG_WARNING, "pid %ld thread %ld: faulted %u "
			    "times on %#llx after SIGBUS; ending the session",
			    (long)cl->pid, (long)tid, HOST_SIGBUS_REPEATS,
			    (unsigned long long)page);
		cl->give_up = true;
		return;
	}
	if (tid > 0 && syscall(SYS_tgkill, cl->pid, tid, SIGBUS) == 0)
		return;
	/*
	 * The thread is not one of the process that connected (a worker it
	 * forked uses the session): no one else is signalled.
	 */
	log_rl(LOG_WARNING, "pid %ld: thread %ld is not one of its threads; "
	    "ending the session", (long)cl->pid, (long)tid);
	cl->give_up = true;
}
