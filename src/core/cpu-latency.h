/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpu-latency.h - [famd] cpu_latency: a PM QoS request for a CPU wake-up
 * latency, held while famd serves (cpu-latency.c).
 */
#ifndef FAMD_CPU_LATENCY_H
#define FAMD_CPU_LATENCY_H

#include <stdint.h>

#include <jansson.h>

struct event;
struct event_base;

struct cpu_latency {
	int fd;             /* the request, -1: not held */
	int64_t us;         /* the value asked; -1: off */
	uint64_t last_ns;   /* the last fault or request */
	uint64_t since_ns;  /* held since */
	uint64_t retry_ns;  /* a failed open: not before */
	uint64_t taken, failures, held_ns;
	int err;            /* the last failure, -errno; 0: none */
	struct event *timer;
};

int cpu_latency_init(struct cpu_latency *q, struct event_base *base,
    int64_t us);
void cpu_latency_set(struct cpu_latency *q, int64_t us);
void cpu_latency_fini(struct cpu_latency *q);
void cpu_latency_take(struct cpu_latency *q, uint64_t now);
json_t *cpu_latency_status(const struct cpu_latency *q);

/* A fault or request came at now: the request is held until idle. */
static inline void
cpu_latency_busy(struct cpu_latency *q, uint64_t now)
{
	q->last_ns = now;
	if (q->fd < 0 && q->us >= 0)
		cpu_latency_take(q, now);
}

#endif
