/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proto.h - famd's wire protocol between nodes (host, dpu, memory), shared
 * by every transport and role.
 *
 * Every message is a 32-byte header followed by `len` bytes of payload. All
 * integers on the wire are big-endian. A request carries an id chosen by the
 * sender; its response echoes the id with FAM_F_RESPONSE set, so many
 * requests can be outstanding on one connection and complete in any order.
 *
 * Nothing read from the network is used before proto_check_hdr() and the
 * matching proto_get_*() have validated it: magic, version, type, flags,
 * payload length against the type's bounds and the receiver's limit, and
 * every field of the payload. Names (of nodes and regions) and paths are
 * printable UTF-8: they end up in famctl's JSON.
 */
#ifndef FAM_PROTO_H
#define FAM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAM_PROTO_MAGIC   0x46414d44u /* "FAMD" */
/*
 * 2: the hello is a challenge-response both ways (HELLO, then AUTH: no
 * secret on the wire), the header carries a CRC32C of chunk data, and
 * region keys are 64 bits.
 */
#define FAM_PROTO_VERSION 2

/* Largest payload any message may carry: one chunk (2 MiB) plus slack. */
#define FAM_PROTO_MAX_PAYLOAD ((2u << 20) + 4096u)
#define FAM_PROTO_HDR_LEN     32u
#define FAM_NAME_MAX          64u  /* node names and region names */
#define FAM_SECRET_MAX        64u
#define FAM_PATH_MAX          1024u
#define FAM_RW_MAX            (FAM_PROTO_MAX_PAYLOAD - 4096u) /* READ/WRITE len */
#define FAM_STATUS_MAX        4095 /* largest errno a response may carry */

/* Message types. A response has the request's type and FAM_F_RESPONSE. */
enum fam_msg_type {
	FAM_MSG_HELLO = 1,         /* first message on a connection */
	FAM_MSG_REGION_CREATE = 2, /* reserve a region on a memory node */
	FAM_MSG_REGION_FREE = 3,   /* release a region */
	FAM_MSG_READ = 4,          /* chunk read (Table I (a)) */
	FAM_MSG_WRITE = 5,         /* chunk write (Table I (b)) */
	FAM_MSG_STATS = 6,         /* the peer's counters, as JSON text */
	FAM_MSG_REGION_LEASE = 7,  /* a new lease on a region (verbs) */
	FAM_MSG_REGION_ADOPT = 8,  /* take a handle on a delegate's region */
	FAM_MSG_REGION_ADVISE = 9, /* a hint about how a region is used */
	FAM_MSG_AUTH = 10,         /* second message: the client's proof */
	FAM_MSG_REGION_DISCARD = 11, /* part of a region will not be read */
	FAM_MSG_TYPE_MAX = 11,
};

#define FAM_F_RESPONSE   0x0001u /* this is the response to request `id` */
/*
 * READ and WRITE requests only: off the critical path (read-ahead,
 * write-back, a dpu's prefetch), counted apart from on-demand traffic.
 */
#define FAM_F_BACKGROUND 0x0002u
#define FAM_F_ALL        0x0003u /* every flag bit defined so far */

/*
 * The header, decoded into host byte order. On the wire, 32 bytes: u32
 * magic, u8 version, u8 type, u16 flags, u32 len, i32 status, u64 id,
 * u32 crc, u32 reserved (zero).
 */
struct fam_hdr {
	uint32_t magic;   /* FAM_PROTO_MAGIC */
	uint8_t version;  /* FAM_PROTO_VERSION */
	uint8_t type;     /* enum fam_msg_type */
	uint16_t flags;   /* FAM_F_* */
	uint32_t len;     /* payload bytes after the header */
	int32_t status;   /* responses: 0 or a positive errno (an error
	                   * response has no payload); requests: 0 */
	uint64_t id;      /* request id, echoed by the response */
	uint32_t crc;     /* CRC32C (Castagnoli, proto_crc32c()) of the
	                   * chunk data of a successful READ response, and
	                   * optionally of a WRITE request's (0: none: a
	                   * host writes back from memory its program may
	                   * write meanwhile, which a CRC would tear); 0 in
	                   * every other message. A mismatch is a lost
	                   * chunk (EBADMSG), never data. */
	uint32_t reserved; /* zero */
};

enum fam_role_wire {
	FAM_WIRE_ROLE_HOST = 1,
	FAM_WIRE_ROLE_DPU = 2,
	FAM_WIRE_ROLE_MEMORY = 3,
};

/*
 * The handshake: two requests, each answered, before anything else.
 * Both sides prove that they hold the shared secret without sending it;
 * each proof covers nonces from both sides, so none can be replayed.
 *
 * HELLO request (client -> server), 112 bytes:
 *   u8  role            enum fam_role_wire of the sender
 *   u8  reserved[3]     zero
 *   u32 features        FAM_FEAT_* the sender understands
 *   u64 resume          session token from an earlier AUTH response, to
 *                       keep that session's regions after a reconnect; 0
 *   char node[64]       sender's node name, NUL-padded
 *   u8  nonce[32]       the client's nonce, random
 * HELLO response (the challenge), 100 bytes:
 *   u8  role, u8 reserved[3]
 *   u8  nonce[32]       the server's nonce, random
 *   char node[64]       the server's node name
 * AUTH request, 32 bytes: u8 proof[32], the client's proof (below).
 * AUTH response, 120 bytes: u8 proof[32], the server's proof, then:
 *   u8  role
 *   u8  piece_shift     a dpu whose caches serve a READ within an aligned
 *                       piece of 2^piece_shift bytes best (its dynamic
 *                       cache's entries), to a client whose HELLO had
 *                       FAM_FEAT_PIECE; else 0. 12..30 when set.
 *   u8  reserved[2], u32 features
 *   u64 session         token naming this session (for resume)
 *   u64 instance        random per server start: a new value means the
 *                       server restarted and every old region is gone
 *   char node[64]
 * Keys (HMAC-SHA256, proto_auth_*()):
 *   K    = HMAC(secret, "famd-v2 secret")      (empty secret: empty key)
 *   Kc   = HMAC(K, "famd-v2 conn" | nonce_c | nonce_s | role_c | role_s |
 *                  node_c[64] | node_s[64])      per connection
 *   proof_c = HMAC(Kc, "famd-v2 client" | resume)
 *   proof_s = HMAC(Kc, "famd-v2 server" | the AUTH response's 88 bytes
 *                  after the proof)
 * The client proves first; the server answers an AUTH whose proof is
 * wrong with EACCES and closes; the client closes on a wrong server
 * proof (EACCES) before it sends any request. A server without a secret
 * takes any client proof, and proves with the empty key. A refused hello
 * is answered with status EACCES (bad proof) or EPROTONOSUPPORT
 * (version), and the connection is closed.
 */
#define FAM_NONCE_LEN 32u
#define FAM_PROOF_LEN 32u

struct fam_hello {
	uint8_t role;
	uint32_t features;
	uint64_t resume;
	char node[FAM_NAME_MAX + 1];
	uint8_t nonce[FAM_NONCE_LEN];
};

/* The HELLO response: the server's challenge. */
struct fam_challenge {
	uint8_t role;
	uint8_t nonce[FAM_NONCE_LEN];
	char node[FAM_NAME_MAX + 1];
};

/* What the AUTH response carries after the server's proof. */
struct fam_hello_resp {
	uint8_t role;
	uint8_t piece_shift;  /* 0, or 12..30 (FAM_FEAT_PIECE) */
	uint32_t features;
	uint64_t session;
	uint64_t instance;
	char node[FAM_NAME_MAX + 1];
};

/* HELLO features. */
#define FAM_FEAT_JOIN 0x1u /* join the live session `resume` as one more
                            * connection (e.g. for background traffic),
                            * instead of taking it over */
#define FAM_FEAT_PIECE 0x2u /* the client cuts its READs at the piece size
                            * the AUTH response gives (piece_shift) */
#define FAM_SESSION_CONNS 16u /* most connections of one session: a
                              * host's main and background ones, and two
                              * for each of up to 7 fault-service threads */

#define FAM_HELLO_LEN      112u
#define FAM_CHALLENGE_LEN  100u
#define FAM_AUTH_LEN       FAM_PROOF_LEN
#define FAM_HELLO_RESP_LEN 88u
#define FAM_AUTH_RESP_LEN  (FAM_PROOF_LEN + FAM_HELLO_RESP_LEN)

/* Region flags (REGION_CREATE). */
#define FAM_RF_FILE       0x01u /* preload from `path` under preload_dir */
#define FAM_RF_SHARED     0x02u /* read-only, shared by `name` */
#define FAM_RF_PERSISTENT 0x04u /* survives the end of the creating session
                                 * (named: it is found again by its name) */
#define FAM_RF_SPARSE     0x08u /* capacity taken as written, not at creation
                                 * (a memory node over tcp; over verbs the
                                 * region is registered whole, so it is
                                 * taken at creation: not in the answer's
                                 * flags then) */
#define FAM_RF_ALL        0x0fu

/*
 * REGION_CREATE request, 24 + name_len + path_len bytes:
 *   u64 size            bytes; for FAM_RF_FILE, 0 means the file's size
 *   u32 flags           FAM_RF_*
 *   u16 name_len        <= FAM_NAME_MAX; required with FAM_RF_SHARED
 *   u16 path_len        <= FAM_PATH_MAX; required with FAM_RF_FILE
 *   u64 place           to a dpu: the instance of the memory node to
 *                       place the region on (0: the dpu chooses); a
 *                       memory node ignores it
 *   name, path          not NUL-terminated
 * A shared region whose name exists is opened (not created) and its size
 * returned. REGION_CREATE response (also of REGION_LEASE and
 * REGION_ADOPT), 64 bytes:
 *   u32 region          id, never reused by this server instance
 *   u32 rkey            verbs: remote key of the lease; tcp: 0
 *   u64 size            bytes actually reserved (reads and writes may
 *                       reach all of them)
 *   u64 addr            verbs: remote address of byte 0 in the lease:
 *                       its offset in its page, 0 for a memory node's
 *                       regions (leases are addressed by offset, and
 *                       show nothing of the memory node's address
 *                       space); tcp: 0
 *   u32 flags           FAM_RF_* in effect
 *   u32 reserved        zero
 *   u64 key             the region's key, 64 random bits, not 0: proves,
 *                       in REGION_ADOPT, that its creator handed it on
 *                       (from a dpu: 0)
 *   u64 length          bytes of content: for FAM_RF_FILE the bytes
 *                       preloaded from the file (its length, for size 0),
 *                       otherwise the size asked for; <= size
 *   u64 mem_instance    from a dpu: the instance of the memory node that
 *                       holds the region; from a memory node: 0
 *   u32 mem_region      from a dpu: the region's id on that memory node
 *   u32 reserved        zero
 *   u64 mem_key         from a dpu: its key there
 * A host that goes through a dpu keeps the mem_* fields so that it can
 * reach the region on the memory node itself (REGION_ADOPT, which gives it
 * a lease of its own) when it switches path or the dpu is lost.
 * Errors: ENOSPC (capacity), EBUSY (a second writer), ENOENT (file),
 * EEXIST (FAM_RF_FILE with the name of a region of another file),
 * EACCES (path escapes preload_dir), EINVAL (bad fields), EMFILE (limit),
 * EHOSTDOWN (a dpu: no memory node reachable).
 */
struct fam_region_create {
	uint64_t size;
	uint32_t flags;
	uint64_t place;
	char name[FAM_NAME_MAX + 1];
	char path[FAM_PATH_MAX + 1];
};

struct fam_region_info {
	uint32_t region;
	uint32_t rkey;
	uint64_t size;
	uint64_t addr;
	uint32_t flags;
	uint64_t key;
	uint64_t length;
	uint64_t mem_instance;
	uint32_t mem_region;
	uint64_t mem_key;
};

#define FAM_REGION_CREATE_MIN 24u
#define FAM_REGION_INFO_LEN   72u

/*
 * REGION_ADOPT request, 32 bytes: the sender's session takes a handle on a
 * region that another session (its delegate, a dpu) created for it, or
 * the other way round:
 *   u64 instance        of the memory node holding the region (a memory
 *                       node: 0 or its own instance; a dpu: the memory
 *                       node it must adopt it from)
 *   u32 region          the region's id there
 *   u32 flags           FAM_ADOPT_*
 *   u64 key             its key from the REGION_CREATE response (a
 *                       dpu's: mem_key)
 *   u64 reserved        zero
 * A session that holds the region already takes one more reference (each
 * REGION_FREE drops one). With FAM_ADOPT_EXCLUSIVE every other session's
 * handle on the region is dropped, so that nothing a delegate still sends
 * is applied after this response: the fence a host puts up before it
 * writes to the region by another path (a session that holds it already
 * keeps its references as they are). Response: as REGION_CREATE, with the
 * sender's lease on this connection (verbs).
 * Errors: ENOENT (no such region, or another instance), EACCES (wrong
 * key: a memory node closes the connection after FAM_EACCES_MAX of
 * them), EINVAL (exclusive on a shared region, bad fields), EHOSTDOWN.
 */
#define FAM_ADOPT_EXCLUSIVE 0x1u
#define FAM_ADOPT_ALL       0x1u

struct fam_region_adopt {
	uint64_t instance;
	uint32_t region;
	uint64_t key;
	uint32_t flags;
};

#define FAM_REGION_ADOPT_LEN 32u
#define FAM_EACCES_MAX       8u /* refusals (EACCES) before the close */

/*
 * REGION_ADVISE request, 8 bytes: u32 region, u32 advice (FAM_ADVICE_*).
 * Response: empty. A memory node accepts and ignores it; a dpu caches a
 * region advised STATIC whole (the copy stays until the region goes), and
 * keeps a region advised RANDOM out of its dynamic cache (its reads are
 * forwarded; NORMAL lets it in again).
 * Errors: ENOENT (unknown region), EINVAL (unknown advice).
 */
#define FAM_ADVICE_NORMAL 0u
#define FAM_ADVICE_STATIC 1u
#define FAM_ADVICE_RANDOM 2u
#define FAM_ADVICE_MAX    2u
#define FAM_REGION_ADVISE_LEN 8u

/*
 * REGION_DISCARD request, 24 bytes: u32 region, u32 reserved, u64 offset,
 * u64 len. The sender will not read [offset, offset + len) again before it
 * writes it: the memory node may release that memory. Response: empty.
 * Errors: ENOENT (unknown region or not this session's), EINVAL (a range
 * past the end, a file region, len 0).
 */
struct fam_region_discard {
	uint32_t region;
	uint64_t offset;
	uint64_t len;
};

#define FAM_REGION_DISCARD_LEN 24u

/*
 * REGION_FREE request, 8 bytes: u32 region, u32 reserved. Response: empty.
 * Errors: ENOENT (unknown region or not this session's).
 */
#define FAM_REGION_FREE_LEN 8u

/*
 * REGION_LEASE request, 8 bytes: u32 region, u32 reserved (as REGION_FREE).
 * Response: a REGION_CREATE response for that region, with
 * a lease (addr, rkey) valid on this connection. On verbs a lease lives as
 * long as the connection that got it: a host that resumes its session on a
 * new connection asks for new leases before its next one-sided access.
 * Errors: ENOENT (unknown region or not this session's).
 */
#define FAM_REGION_LEASE_LEN FAM_REGION_FREE_LEN

/*
 * READ request (Table I (a)), 32 bytes:
 *   u32 region, u32 len (bytes, > 0, <= FAM_PROTO_MAX_PAYLOAD - 4096)
 *   u64 offset          byte offset in the region
 *   u64 dest_addr       verbs: where to RDMA WRITE the data; tcp: 0
 *   u32 dest_rkey       verbs: rkey of dest_addr; tcp: 0
 *   u32 reserved
 * READ response: `len` bytes of data, their CRC32C in the header's crc.
 * Errors: ENOENT (unknown region), ERANGE
 * (offset + len past the end), EINVAL.
 */
struct fam_rw {
	uint32_t region;
	uint32_t len;
	uint64_t offset;
	uint64_t dest_addr;
	uint32_t dest_rkey;
};

#define FAM_READ_LEN      32u
/*
 * WRITE request (Table I (b)), 16 + len bytes:
 *   u32 region, u32 len, u64 offset, then len bytes of data.
 * proto_get_write_hdr() takes the whole payload length and reads only the
 * first 16 bytes; len must be that payload length minus 16.
 * The header's crc is the CRC32C of the data, or 0 (not checked).
 * WRITE response: empty, sent once the data is in the memory node's memory.
 * Errors: as READ, plus EROFS (a shared read-only region), EBADMSG (the
 * data does not match its CRC: the chunk is lost, write it again).
 */
#define FAM_WRITE_HDR_LEN 16u

/* STATS request: empty. Response: JSON object text (not NUL-terminated). */

/* Header encoding and validation. */
void proto_put_hdr(uint8_t out[FAM_PROTO_HDR_LEN], const struct fam_hdr *h);
int proto_get_hdr(const uint8_t in[FAM_PROTO_HDR_LEN], struct fam_hdr *h);
int proto_check_hdr(const struct fam_hdr *h, uint32_t max_payload);
void proto_put_hdr_crc(uint8_t out[FAM_PROTO_HDR_LEN], uint32_t crc);

/* Payload encoding (return bytes written) and decoding (0 or -errno). */
size_t proto_put_hello(uint8_t *out, const struct fam_hello *m);
int proto_get_hello(const uint8_t *in, size_t len, struct fam_hello *m);
size_t proto_put_challenge(uint8_t *out, const struct fam_challenge *m);
int proto_get_challenge(const uint8_t *in, size_t len,
    struct fam_challenge *m);
size_t proto_put_hello_resp(uint8_t *out, const struct fam_hello_resp *m);
int proto_get_hello_resp(const uint8_t *in, size_t len,
    struct fam_hello_resp *m);
size_t proto_put_region_create(uint8_t *out, size_t cap,
    const struct fam_region_create *m);
int proto_get_region_create(const uint8_t *in, size_t len,
    struct fam_region_create *m);
size_t proto_put_region_info(uint8_t *out, const struct fam_region_info *m);
int proto_get_region_info(const uint8_t *in, size_t len,
    struct fam_region_info *m);
size_t proto_put_region_free(uint8_t *out, uint32_t region);
int proto_get_region_free(const uint8_t *in, size_t len, uint32_t *region);
size_t proto_put_region_adopt(uint8_t *out, const struct fam_region_adopt *m);
int proto_get_region_adopt(const uint8_t *in, size_t len,
    struct fam_region_adopt *m);
size_t proto_put_region_discard(uint8_t *out,
    const struct fam_region_discard *m);
int proto_get_region_discard(const uint8_t *in, size_t len,
    struct fam_region_discard *m);
size_t proto_put_region_advise(uint8_t *out, uint32_t region,
    uint32_t advice);
int proto_get_region_advise(const uint8_t *in, size_t len, uint32_t *region,
    uint32_t *advice);
size_t proto_put_read(uint8_t *out, const struct fam_rw *m);
int proto_get_read(const uint8_t *in, size_t len, struct fam_rw *m);
size_t proto_put_write_hdr(uint8_t *out, const struct fam_rw *m);
int proto_get_write_hdr(const uint8_t *in, size_t len, struct fam_rw *m);

const char *proto_type_name(unsigned type);
bool proto_utf8_valid(const void *p, size_t len);
bool proto_secret_equal(const char *a, const char *b);

/* proto-crc.c: CRC32C (Castagnoli), hardware-assisted where there is. */
uint32_t proto_crc32c(uint32_t crc, const void *p, size_t len);

/* proto-auth.c: the handshake's keys and proofs (libcrypto HMAC-SHA256). */
#define FAM_KEY_LEN 32u
struct fam_auth {
	uint8_t key[FAM_KEY_LEN];   /* Kc, this connection's key */
};
/* One peer's own secret: the node name it must present, and its K. */
struct fam_peer_key {
	char name[FAM_NAME_MAX + 1];
	uint8_t key[FAM_KEY_LEN];
};
int proto_auth_secret_key(const char *secret, uint8_t out[FAM_KEY_LEN]);
int proto_auth_nonce(uint8_t out[FAM_NONCE_LEN]);
int proto_auth_derive(struct fam_auth *a, const uint8_t key[FAM_KEY_LEN],
    const struct fam_hello *hello, const struct fam_challenge *ch);
int proto_auth_client_proof(const struct fam_auth *a, uint64_t resume,
    uint8_t out[FAM_PROOF_LEN]);
int proto_auth_server_proof(const struct fam_auth *a,
    const uint8_t resp[FAM_HELLO_RESP_LEN], uint8_t out[FAM_PROOF_LEN]);
bool proto_auth_equal(const uint8_t *a, const uint8_t *b, size_t len);

#endif /* FAM_PROTO_H */
