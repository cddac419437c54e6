/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.h - the protocol between a program (libfam, libfamshim) and
 * the host famd, over the Unix stream socket `session_socket`.
 *
 * Both ends are on one machine, so integers are in host byte order; famd
 * still validates every field, and takes the program's pid and uid from
 * SO_PEERCRED, never from a message. Every message is one struct fam_smsg,
 * followed by `len` bytes (a path) for FAM_S_ALLOC of a file, and may carry
 * one descriptor (SCM_RIGHTS) where noted. Requests are answered in order.
 *
 * A session:
 *   1. program -> HELLO                 famd -> HELLO reply, carrying a
 *                                       descriptor of /dev/userfaultfd when
 *                                       the program's user is in famd's
 *                                       uffd_device_group
 *   2. program creates its userfaultfd (the syscall; USERFAULTFD_IOC_NEW on
 *      that descriptor when the syscall is refused; else the syscall with
 *      UFFD_USER_MODE_ONLY, which does not catch the kernel's faults: a
 *      system call into a page not resident fails with EFAULT) and keeps a
 *      copy
 *      program -> UFFD + descriptor      famd -> reply (UFFDIO_API done)
 *   3. program -> ALLOC                 famd -> reply; with FAM_S_NEW_ARENA
 *                                       and the arena's memfd attached the
 *                                       program maps it (MAP_SHARED, and
 *                                       MADV_DONTFORK) and sends
 *      program -> MAP (arena, address)  famd -> reply, once the range is
 *                                       registered for faults
 *   4. program -> FREE / STAT / ...
 *   fork: parent -> FORK (before fork())   famd -> reply: a token
 *         child, a session of its own (steps 1 and 2), for each arena:
 *         child -> ADOPT (token, arena)   famd -> reply + memfd; the child
 *                                          maps it where the parent had it
 *         child -> MAP (new arena, address)
 * The session ends when the socket closes: famd then releases every region
 * of the program on the host and on the memory nodes, unless famd itself
 * is what went away (a restart):
 *   restart: the program keeps its copies of the userfaultfd and of each
 *         arena's memfd (its faulting threads block meanwhile), connects
 *         again and sends steps 1 and then, instead of UFFD:
 *         program -> RECLAIM (token, arenas) + userfaultfd   famd -> reply
 *         program -> REARENA (id, address, length) + memfd,  famd -> reply
 *                    once per arena; the reply to the last one comes once
 *                    famd serves the arenas again (host-restart.c)
 *
 * Arenas: an arena's length is the size of its memfd, which famd seals
 * (F_SEAL_SHRINK, F_SEAL_SEAL): ftruncate to less and F_ADD_SEALS fail
 * with EPERM. The program maps each arena at an address aligned to the
 * largest power of two that is at most both that length and
 * FAM_SESSION_ARENA_ALIGN, so a region whose offset is aligned to
 * `alignment` (up to that) has an address so aligned. A session holds at
 * most one arena it has not mapped: an ALLOC that needs another is EBUSY.
 *
 * When famd dies, the program (which keeps its own copy of the userfaultfd)
 * maps every arena onto an empty file and wakes the threads waiting in
 * faults, which then get SIGBUS. famd must therefore not enable the
 * UFFD_FEATURE_EVENT_* features on the program's userfaultfd: an unread
 * UNMAP or REMAP event would block that remapping for ever.
 */
#ifndef FAM_SESSION_H
#define FAM_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAM_SESSION_MAGIC   0x46414d53u /* "FAMS" */
#define FAM_SESSION_VERSION 1
#define FAM_SESSION_MAX_DATA 1024u       /* longest path */
#define FAM_SESSION_SOCKET   "/run/famd/session.sock" /* default */
#define FAM_SESSION_ARENA_ALIGN (1ull << 30) /* most an arena is aligned to */
#define FAM_SESSION_MAX_REGION (1ull << 46) /* largest ALLOC size (bytes) */
#define FAM_SESSION_MAX_CHUNK  (1ull << 30) /* largest chunk a HELLO reply gives */
#define FAM_SESSION_MAX_ARENA  (1ull << 47) /* largest arena (bytes) */
#define FAM_SESSION_MAX_COPIES 16u /* most copies an ALLOC asks for */
#define FAM_SESSION_EC         0x10000u /* ALLOC's d: ec:K+M, K in bits 8-15,
                                         * M in bits 0-7 (1 to 16 each) */

enum fam_smsg_type {
	/*
	 * a: API version; reply a: chunk_size, b: arena_size, c: features,
	 * d: the session's token (64 random bits, not 0: what RECLAIM names
	 * it by after a restart of famd; 0 from a famd that cannot restart
	 * without losing it)
	 */
	FAM_S_HELLO = 1,
	/* descriptor: the program's userfaultfd; reply: status only */
	FAM_S_UFFD = 2,
	/*
	 * a: size, b: FAM_S_ALLOC_* flags, c: alignment of the offset (0 or
	 * a power of two up to FAM_SESSION_ARENA_ALIGN), data: path of a
	 * file under the memory node's preload_dir (`len` bytes, no NUL).
	 * reply a: arena id, b: offset of the region in the arena, c: bytes
	 * reserved (for a file: the file's length; the region reserves it
	 * rounded up to chunk_size), d: region handle; flags FAM_S_NEW_ARENA
	 * with the arena's memfd attached (the program then sends MAP).
	 * d: copies of each chunk asked for (0: famd's [host] redundancy;
	 * 1: none; 2 to FAM_SESSION_MAX_COPIES: replicate:d;
	 * FAM_SESSION_EC | K << 8 | M: ec:K+M; FAM_REDUNDANCY)
	 */
	FAM_S_ALLOC = 3,
	/* a: arena id, b: address where the program mapped it; reply: status */
	FAM_S_MAP = 4,
	/* a: region handle; reply: status */
	FAM_S_FREE = 5,
	/*
	 * a: address inside a region; reply a: region handle, b: size,
	 * c: resident bytes, d: dirty bytes, flags: FAM_S_ALLOC_* of the region
	 */
	FAM_S_STAT = 6,
	/*
	 * a: address inside a region, b: FAM_ADVISE_* (famd-client.h; the
	 * values of FAM_ADVICE_* in proto.h); reply: status
	 */
	FAM_S_ADVISE = 7,
	/*
	 * a: address of a chunk inside a region, b: bytes (a multiple of
	 * chunk_size): from a on, up to the region's end, those chunks read
	 * back as zeros from now on (madvise DONTNEED, FREE and REMOVE,
	 * munmap of part of a block); reply a: the bytes discarded; EAGAIN
	 * when a fork's copy shares the chunk at a: the program writes zeros
	 * over that chunk itself, and asks again for the rest
	 */
	FAM_S_DISCARD = 8,
	/*
	 * fork(), in the parent before it (doc/fork.md): famd copies every
	 * region of the session and keeps the copy for the child; the
	 * program's writes to its regions wait meanwhile. reply a: the copy's
	 * token (64 random bits: what lets the child claim it)
	 */
	FAM_S_FORK = 9,
	/*
	 * In the child, on a session of its own: a: the token, b: the
	 * parent's id of one of its arenas. The first ADOPT moves the copied
	 * regions into this session. reply a: the new arena's id, b: the
	 * address where the parent mapped it (the child maps it there, then
	 * sends MAP), c: its length; the arena's memfd attached
	 */
	FAM_S_ADOPT = 10,
	/*
	 * After a restart of famd, instead of UFFD (descriptor: the program's
	 * userfaultfd, the one the session had): a: the old session's token
	 * (its HELLO reply's d), b: how many REARENA follow (the program's
	 * arenas of that session). reply: status only; ENOENT when famd
	 * knows no such session (the program's memory is lost), EPERM when
	 * it was another process's
	 */
	FAM_S_RECLAIM = 11,
	/*
	 * One arena of a reclaimed session (descriptor: its memfd): a: its
	 * id, b: the address where the program maps it, c: its length.
	 * reply: status only; an arena refused (ENOENT, EINVAL, EBADF) is
	 * lost to the program, the others are served again
	 */
	FAM_S_REARENA = 12,
	FAM_S_TYPE_MAX = 12,
};

#define FAM_S_ALLOC_FILE     0x01u /* preload `data` from the memory node */
#define FAM_S_ALLOC_SHARED   0x02u /* ... read-only, shared by every user */
#define FAM_S_ALLOC_SPARSE   0x04u /* a reservation (MAP_NORESERVE): the memory
                                    * node takes capacity as it is written */
#define FAM_S_ALLOC_ALL      0x07u

#define FAM_S_NEW_ARENA      0x01u /* reply flag: memfd attached, send MAP */

#define FAM_S_FEAT_DEVFD     0x01u /* HELLO reply carries /dev/userfaultfd */

struct fam_smsg {
	uint32_t magic;   /* FAM_SESSION_MAGIC */
	uint16_t version; /* FAM_SESSION_VERSION */
	uint16_t type;    /* enum fam_smsg_type */
	uint32_t len;     /* bytes of data after the message */
	int32_t status;   /* replies: 0 or a positive errno */
	uint32_t flags;   /* by type */
	uint32_t reserved;
	uint64_t seq;     /* request number, echoed by the reply */
	uint64_t a, b, c, d;
};

/*
 * Decoding and validation (wire/session.c), shared by the host famd, which
 * checks requests, and libfam, which checks replies: no I/O, no
 * allocation, no stdio, so libfam may call them from inside malloc.
 */
size_t fam_smsg_take(const void *buf, size_t len, struct fam_smsg *m,
    char data[FAM_SESSION_MAX_DATA + 1]);
int fam_smsg_check_request(const struct fam_smsg *m, bool have_uffd);
int fam_smsg_check_alloc(const struct fam_smsg *m, uint64_t arena_size);
int fam_smsg_check_map(uint64_t addr, uint64_t arena_len);
int fam_smsg_check_reply(const struct fam_smsg *m, uint16_t type,
    uint64_t seq);
int fam_smsg_check_hello_reply(const struct fam_smsg *m, uint64_t page);

#endif /* FAM_SESSION_H */
