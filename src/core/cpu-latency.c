/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpu-latency.c - [famd] cpu_latency: while famd serves faults or
 * requests, this machine's idle CPUs wake within that many microseconds.
 *
 * A fault's round trip is a chain of wake-ups (the program's thread wakes
 * the host famd, which wakes the memory famd, and back); an idle CPU in a
 * deep idle state (or a virtual CPU halted in its hypervisor) takes tens
 * of microseconds to wake for each. famd asks the kernel's PM QoS for a
 * CPU wake-up latency (Documentation/power/pm_qos_interface.rst: a request
 * on /dev/cpu_dma_latency, held as long as the file is open): taken when a
 * fault or request comes while it is not held, dropped once none came for
 * CPU_LATENCY_IDLE_NS, so an idle famd holds nothing and costs no power.
 * Closing the file drops it, so a famd that dies holds nothing either.
 *
 * Owns: the request's file descriptor, the idle timer, the counters.
 * Failure: a famd that may not open the file (not root, the device
 * missing) logs why once, tries again after CPU_LATENCY_RETRY_NS, and
 * serves as before.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "base/base.h"
#include "core/cpu-latency.h"

#define CPU_LATENCY_DEV     "/dev/cpu_dma_latency"
#define CPU_LATENCY_IDLE_NS 1000000000ull  /* dropped after 1 s idle */
#define CPU_LATENCY_RETRY_NS 60000000000ull /* a failed open: once a minute */

/* Drops the request (if held). */
static void
cpu_latency_drop(struct cpu_latency *q, uint64_t now)
{
	if (q->fd < 0)
		return;
	close(q->fd);
	q->fd = -1;
	q->held_ns += now - q->since_ns;
	if (q->timer != NULL)
		event_del(q->timer);
}

/* Every quarter second while held: drops the request once idle. */
static void
cpu_latency_tick(evutil_socket_t fd, short what, void *arg)
{
	struct cpu_latency *q = arg;
	uint64_t now = mono_ns();

	(void)fd;
	(void)what;
	if (now - q->last_ns >= CPU_LATENCY_IDLE_NS)
		cpu_latency_drop(q, now);
}

/* Writes the value asked on the held request; 0 or -errno. */
static int
cpu_latency_write(struct cpu_latency *q)
{
	int32_t v = (int32_t)q->us;

	if (write(q->fd, &v, sizeof v) != (ssize_t)sizeof v)
		return errno != 0 ? -errno : -EIO;
	return 0;
}

/* Takes the request: a fault or request came while it was not held. */
void
cpu_latency_take(struct cpu_latency *q, uint64_t now)
{
	static const struct timeval quarter = { 0, 250000 };
	int rc;

	if (q->us < 0 || now < q->retry_ns)
		return;
	q->fd = open(CPU_LATENCY_DEV, O_WRONLY | O_CLOEXEC);
	rc = q->fd < 0 ? -errno : cpu_latency_write(q);
	if (rc < 0) {
		if (q->fd >= 0)
			close(q->fd);
		q->fd = -1;
		q->failures++;
		q->retry_ns = now + CPU_LATENCY_RETRY_NS;
		if (q->err != rc)
			log_notice("cannot ask for a CPU wake-up latency of %lld "
			    "us (%s: %s): faults wait for idle CPUs to wake; "
			    "[famd] cpu_latency = off stops trying",
			    (long long)q->us, CPU_LATENCY_DEV, strerror(-rc));
		q->err = rc;
		return;
	}
	if (q->err != 0)
		log_notice("CPU wake-up latency of %lld us held again",
		    (long long)q->us);
	q->err = 0;
	q->taken++;
	q->since_ns = now;
	if (q->timer != NULL)
		event_add(q->timer, &quarter);
}

/* Sets up q for the value us (-1: off) on the loop base. */
int
cpu_latency_init(struct cpu_latency *q, struct event_base *base, int64_t us)
{
	memset(q, 0, sizeof *q);
	q->fd = -1;
	q->us = us;
	q->timer = event_new(base, -1, EV_PERSIST, cpu_latency_tick, q);
	return q->timer != NULL ? 0 : -ENOMEM;
}

/* The value changed (a reload): applies it to a held request. */
void
cpu_latency_set(struct cpu_latency *q, int64_t us)
{
	if (us == q->us)
		return;
	q->us = us;
	q->retry_ns = 0;
	q->err = 0;
	if (q->fd < 0)
		return;
	if (us < 0 || cpu_latency_write(q) < 0)
		cpu_latency_drop(q, mono_ns());
}

/* Drops the request and frees the timer. */
void
cpu_latency_fini(struct cpu_latency *q)
{
	cpu_latency_drop(q, mono_ns());
	if (q->timer != NULL)
		event_free(q->timer);
	q->timer = NULL;
}

/* The status object: the value, whether held, since when, how often. */
json_t *
cpu_latency_status(const struct cpu_latency *q)
{
	uint64_t held = q->held_ns;

	if (q->fd >= 0)
		held += mono_ns() - q->since_ns;
	return json_pack("{s:I,s:b,s:I,s:f,s:I,s:s?}",
	    "us", (json_int_t)q->us,
	    "held", q->fd >= 0,
	    "taken", (json_int_t)q->taken,
	    "held_seconds", (double)held / 1e9,
	    "failures", (json_int_t)q->failures,
	    "error", q->err != 0 ? strerror(-q->err) : NULL);
}
