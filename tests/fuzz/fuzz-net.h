/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-net.h - the peers of a famd that listens for them, for the targets
 * that drive a role over tcp (fuzz-memory, fuzz-dpu).
 *
 * An input holds the streams of up to four peers, cut at each "NEXTPEER"
 * or "WITHPEER": a stream after NEXTPEER goes on a new connection once the
 * connections before it have closed (a later session finds what earlier
 * ones left), one after WITHPEER on a new connection at the same time as
 * the stream before it (two sessions at once). Each stream is sent on a
 * real connection, which is then shut down for writing; the loop runs
 * until famd has closed every connection of the group, within 20 s.
 *
 * Whatever famd sends back must be protocol: every header passes
 * proto_check_hdr() as a response, and the payload of a successful HELLO,
 * REGION_CREATE, REGION_LEASE or REGION_ADOPT response decodes.
 */
#ifndef FAMD_FUZZ_NET_H
#define FAMD_FUZZ_NET_H

#include <stddef.h>
#include <stdint.h>

struct cfg;
struct event_base;
struct famd;

const char *fuzz_net_dir(const char *name);
void fuzz_net_cfg(struct cfg *cfg, const char *text);
uint16_t fuzz_listen_port(struct famd *d, const char *section);
void fuzz_streams(struct event_base *base, uint16_t port,
    const uint8_t *data, size_t size);

#endif /* FAMD_FUZZ_NET_H */
