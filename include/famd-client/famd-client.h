/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famd-client.h - libfamd-client: fabric-attached memory for programs.
 *
 * Memory from fam_alloc() lives on a memory node and is paged into this
 * node's buffer by the host famd as the program touches it. It is ordinary
 * memory to the program: any thread may read and write it, and pointers into
 * it may be passed to system calls.
 *
 * If famd cannot serve a page (the memory node is lost, the host famd
 * died), the thread touching it gets SIGBUS: never wrong data.
 *
 * The library finds the host famd at $FAM_SOCKET, else
 * /run/famd/session.sock. Functions return NULL or -1 and set errno.
 */
#ifndef FAMD_CLIENT_H
#define FAMD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAM_API_VERSION 1

/* fam_alloc_file() modes. */
#define FAM_FILE_SHARED  0x1 /* read-only, one copy shared by every user */
#define FAM_FILE_PRIVATE 0x2 /* a private, writable copy of the file */

/* fam_advise() advice. */
#define FAM_ADVISE_NORMAL 0 /* no particular use (the default) */
#define FAM_ADVISE_STATIC 1 /* small and read often, at random: worth a whole
                             * copy near this node (a dpu's static cache) */
#define FAM_ADVISE_RANDOM 2 /* read at random, each piece seldom: no
                             * read-ahead, not worth a dpu's dynamic cache */

/*
 * fam_alloc_redundant() redundancy: how many memory nodes hold each chunk
 * of the block (famd.conf(5), [host] redundancy).
 */
#define FAM_ALLOC_DEFAULT 0u /* as fam_alloc(): FAM_REDUNDANCY, else famd's */
#define FAM_ALLOC_NONE    1u /* one memory node: lost with it */
/* n copies (2 to 16) on n memory nodes: survives n - 1 of them lost */
#define FAM_ALLOC_REPLICATE(n) ((unsigned)(n))
/* k data and m parity fragments (1 to 16 each): survives m lost */
#define FAM_ALLOC_EC(k, m) \
	(0x10000u | ((unsigned)(k) & 0xffu) << 8 | ((unsigned)(m) & 0xffu))

/* fam_stat() flags. */
#define FAM_STAT_FILE     0x1
#define FAM_STAT_READONLY 0x2

struct fam_stat {
	size_t size;       /* bytes reserved (a multiple of the chunk size) */
	size_t resident;   /* bytes in this node's buffer now */
	size_t dirty;      /* resident bytes not yet written back */
	unsigned flags;    /* FAM_STAT_* */
	uint64_t handle;   /* famd's name for the region */
};

/* Zero-filled memory of at least size bytes, aligned to the chunk size. */
void *fam_alloc(size_t size);

/*
 * Like fam_alloc(), each chunk kept as `redundancy` asks (FAM_ALLOC_*),
 * whatever FAM_REDUNDANCY and famd's configuration say. EINVAL when it asks
 * for a mode famd does not know or more memory nodes than it has.
 */
void *fam_alloc_redundant(size_t size, unsigned redundancy);

/*
 * Memory holding the file `path` (relative to the memory node's
 * preload_dir), loaded there, not here. *size receives its length.
 */
void *fam_alloc_file(const char *path, int mode, size_t *size);

/* Releases memory from fam_alloc() or fam_alloc_file(). */
int fam_free(void *ptr);

/* Describes the region holding ptr. */
int fam_stat(const void *ptr, struct fam_stat *st);

/* Returns 1 if ptr lies in fabric-attached memory of this process. */
int fam_owns(const void *ptr);

/* Bytes usable from ptr, the start of a region; 0 if not one. */
size_t fam_usable_size(const void *ptr);

/*
 * Tells famd how the region holding ptr is used (FAM_ADVISE_*). A hint:
 * it changes how fast the memory is, never what it holds.
 */
int fam_advise(const void *ptr, int advice);

#ifdef __cplusplus
}
#endif

#endif /* FAMD_CLIENT_H */
