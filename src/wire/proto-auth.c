/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proto-auth.c - the handshake's cryptography (proto.h, "The handshake"):
 * the secret's key, nonces, the per-connection key and both proofs, all
 * HMAC-SHA256 from OpenSSL's libcrypto (src/wire/README.md says why).
 *
 * Owns nothing that lives: every function works on its arguments. Keys
 * and messages on the stack are wiped before return.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "wire/proto.h"

/* The longest message any key or proof is computed over. */
#define AUTH_MSG_MAX 256u

/* HMAC-SHA256 of len bytes at msg under key (klen bytes). 0 or -EIO. */
static int
auth_hmac(const uint8_t *key, size_t klen, const uint8_t *msg, size_t len,
    uint8_t out[FAM_KEY_LEN])
{
	static const uint8_t none[1];
	unsigned int olen = 0;

	if (HMAC(EVP_sha256(), klen > 0 ? key : none, (int)klen, msg, len,
	    out, &olen) == NULL || olen != FAM_KEY_LEN)
		return -EIO;
	return 0;
}

/* Appends len bytes to the message being built at m (*off so far). */
static void
auth_put(uint8_t *m, size_t *off, const void *p, size_t len)
{
	memcpy(m + *off, p, len);
	*off += len;
}

/*
 * Derives K, the key of a secret (NUL-terminated, may be empty: then K
 * is the HMAC under the empty key, which anyone can compute). 0 or -EIO.
 */
int
proto_auth_secret_key(const char *secret, uint8_t out[FAM_KEY_LEN])
{
	static const char label[] = "famd-v2 secret";

	return auth_hmac((const uint8_t *)secret, strnlen(secret,
	    FAM_SECRET_MAX), (const uint8_t *)label, sizeof label - 1, out);
}

/* Fills a nonce with random bytes. 0 or -errno. */
int
proto_auth_nonce(uint8_t out[FAM_NONCE_LEN])
{
	size_t got = 0;

	while (got < FAM_NONCE_LEN) {
		ssize_t n = getrandom(out + got, FAM_NONCE_LEN - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	return 0;
}

/*
 * Derives the connection's key Kc from K, the client's hello and the
 * server's challenge (nonces, roles and names of both). 0 or -EIO.
 */
int
proto_auth_derive(struct fam_auth *a, const uint8_t key[FAM_KEY_LEN],
    const struct fam_hello *hello, const struct fam_challenge *ch)
{
	static const char label[] = "famd-v2 conn";
	uint8_t m[AUTH_MSG_MAX], node[FAM_NAME_MAX];
	size_t off = 0;
	int err;

	auth_put(m, &off, label, sizeof label - 1);
	auth_put(m, &off, hello->nonce, FAM_NONCE_LEN);
	auth_put(m, &off, ch->nonce, FAM_NONCE_LEN);
	auth_put(m, &off, &hello->role, 1);
	auth_put(m, &off, &ch->role, 1);
	memset(node, 0, sizeof node);
	memcpy(node, hello->node, strnlen(hello->node, FAM_NAME_MAX));
	auth_put(m, &off, node, FAM_NAME_MAX);
	memset(node, 0, sizeof node);
	memcpy(node, ch->node, strnlen(ch->node, FAM_NAME_MAX));
	auth_put(m, &off, node, FAM_NAME_MAX);
	err = auth_hmac(key, FAM_KEY_LEN, m, off, a->key);
	explicit_bzero(m, sizeof m);
	return err;
}

/* The client's proof: HMAC(Kc, label | resume, big-endian). 0 or -EIO. */
int
proto_auth_client_proof(const struct fam_auth *a, uint64_t resume,
    uint8_t out[FAM_PROOF_LEN])
{
	static const char label[] = "famd-v2 client";
	uint8_t m[AUTH_MSG_MAX];
	size_t off = 0;

	auth_put(m, &off, label, sizeof label - 1);
	for (int i = 7; i >= 0; i--)
		m[off++] = (uint8_t)(resume >> (8 * i));
	return auth_hmac(a->key, FAM_KEY_LEN, m, off, out);
}

/*
 * The server's proof: HMAC(Kc, label | the AUTH response after the
 * proof), so that the session and instance are authenticated too.
 */
int
proto_auth_server_proof(const struct fam_auth *a,
    const uint8_t resp[FAM_HELLO_RESP_LEN], uint8_t out[FAM_PROOF_LEN])
{
	static const char label[] = "famd-v2 server";
	uint8_t m[AUTH_MSG_MAX];
	size_t off = 0;

	auth_put(m, &off, label, sizeof label - 1);
	auth_put(m, &off, resp, FAM_HELLO_RESP_LEN);
	return auth_hmac(a->key, FAM_KEY_LEN, m, off, out);
}

/* Compares two proofs in time that does not depend on where they differ. */
bool
proto_auth_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}
