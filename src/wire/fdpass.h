/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdpass.h - a message and a descriptor over a Unix socket (SCM_RIGHTS),
 * as the host famd and its programs pass memfds and userfaultfds. No
 * logging, no stdio: the client libraries compile it too.
 */
#ifndef FAMD_FDPASS_H
#define FAMD_FDPASS_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Most descriptors one received message may carry; more is truncation. */
#define FDPASS_MAX 4

ssize_t fdpass_send(int sock, struct iovec *iov, int iovcnt, int fd,
    int flags);
ssize_t fdpass_recv(int sock, void *buf, size_t len, int *fd, bool *truncated,
    int flags);

#endif /* FAMD_FDPASS_H */
