/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport-tls.c - TLS 1.3 under the tcp transport (OpenSSL's libssl),
 * mutual: both ends present a certificate and verify the other's against
 * the same CA.
 *
 * Owns: struct fam_tls (an SSL_CTX: certificate, key, CA; made by the role
 * at start), struct tls_conn (an SSL on a connection's socket, its
 * plaintext output buffer). States of a tls_conn: handshaking (ready
 * false: every read or write first drives SSL_do_handshake), ready, failed
 * (the connection is closed by transport-tcp.c). No locks: a tls_conn
 * belongs to its connection's loop; an SSL_CTX is shared read-only.
 *
 * transport-tcp.c calls tls_readv() and tls_writev() in place of readv()
 * and writev() when a connection has TLS; both return what those return
 * (-1 and errno EAGAIN when the socket has to become readable or
 * writable: tls_wants_read() or tls_wants_write() says which, as TLS may
 * need the other direction than the call's).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/base.h"
#include "transport/transport-int.h"

#define TLS_WBUF_LEN (64u << 10) /* plaintext handed to one SSL_write_ex */

struct fam_tls {
	SSL_CTX *ctx;
};

struct tls_conn {
	SSL *ssl;
	const char *peer;       /* the connection's peer, for the log */
	bool ready;             /* handshake done */
	bool read_wants_write;  /* the last read waits for room to write */
	bool write_wants_read;  /* the last write waits for input */
	uint8_t *wbuf;          /* plaintext being written (a retry must
	                         * hand SSL_write_ex the same bytes) */
	size_t wlen;
};

/* Formats OpenSSL's oldest queued error into buf, or "unknown error". */
static const char *
tls_err_text(char *buf, size_t len)
{
	unsigned long e = ERR_peek_error();

	if (e == 0)
		return "unknown error";
	ERR_error_string_n(e, buf, len);
	return buf;
}

/* Makes a cause string "what file: OpenSSL's reason" and clears the queue. */
static char *
tls_cause(const char *what, const char *file)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
	char *cause;

	cause = xasprintf("tls: %s %s: %s", what, file,
	    reason != NULL ? reason : "failed");
	ERR_clear_error();
	return cause;
}

/*
 * Makes the TLS settings of every tcp connection of this famd: its
 * certificate (chain) and key, and the CA a peer's certificate must be
 * signed by. TLS 1.3 only, no session tickets or resumption. Returns 0, or
 * -EINVAL with *cause.
 */
int
fam_tls_new(const char *cert, const char *key, const char *ca,
    struct fam_tls **out, char **cause)
{
	struct fam_tls *t = calloc(1, sizeof *t);

	*out = NULL;
	if (t == NULL) {
		*cause = xasprintf("tls: out of memory");
		return -ENOMEM;
	}
	ERR_clear_error();
	t->ctx = SSL_CTX_new(TLS_method());
	if (t->ctx == NULL) {
		*cause = tls_cause("cannot make a context for", "TLS 1.3");
		goto fail;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_3_VERSION);
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_TICKET |
	    SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER |
	    SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
		*cause = tls_cause("tls_cert", cert);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
		*cause = tls_cause("tls_key", key);
		goto fail;
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		*cause = tls_cause("tls_key does not match tls_cert:", key);
		goto fail;
	}
	if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1) {
		*cause = tls_cause("tls_ca", ca);
		goto fail;
	}
	*out = t;
	return 0;
fail:
	fam_tls_free(t);
	return -EINVAL;
}

/* Frees TLS settings made by fam_tls_new() (connections keep their own). */
void
fam_tls_free(struct fam_tls *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/*
 * Starts TLS on a connected (or accepted) socket: the client side when
 * active. peer names the connection in the log and must outlive it.
 */
struct tls_conn *
tls_conn_new(struct fam_tls *t, int fd, bool active, const char *peer)
{
	struct tls_conn *s = calloc(1, sizeof *s);

	if (s == NULL)
		return NULL;
	ERR_clear_error();
	s->ssl = SSL_new(t->ctx);
	if (s->ssl == NULL || SSL_set_fd(s->ssl, fd) != 1) {
		ERR_clear_error();
		tls_conn_free(s);
		return NULL;
	}
	s->peer = peer;
	if (active)
		SSL_set_connect_state(s->ssl);
	else
		SSL_set_accept_state(s->ssl);
	return s;
}

/* Frees a connection's TLS state; the socket is the caller's. */
void
tls_conn_free(struct tls_conn *s)
{
	if (s == NULL)
		return;
	SSL_free(s->ssl);
	free(s->wbuf);
	free(s);
}

/* True when a reason of OpenSSL's says the peer does not speak TLS. */
static bool
tls_not_tls(int reason)
{
	return reason == SSL_R_WRONG_VERSION_NUMBER ||
	    reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
	    reason == SSL_R_HTTP_REQUEST ||
	    reason == SSL_R_UNEXPECTED_EOF_WHILE_READING;
}

/* True when the peer's alert says it refused our certificate. */
static bool
tls_cert_refused(int reason)
{
	return reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
	    reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
	    reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
	    reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
	    reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR;
}

/*
 * Logs that the peer refused our certificate (in TLS 1.3 the client hears
 * of it after its own handshake is done) and returns -EACCES.
 */
static int
tls_refused_by_peer(struct tls_conn *s, unsigned long e)
{
	log_rl(LOG_NOTICE, "tls: %s: the peer refused this node's "
	    "certificate (%s): is [famd] tls_cert signed by the CA the peer "
	    "trusts?", s->peer, ERR_reason_error_string(e));
	ERR_clear_error();
	return -EACCES;
}

/* Logs why the handshake with s's peer failed, once per cause a second. */
static int
tls_handshake_failed(struct tls_conn *s, int err)
{
	long vr = SSL_get_verify_result(s->ssl);
	unsigned long e = ERR_peek_last_error();
	char buf[256];

	if (vr != X509_V_OK) {
		log_rl(LOG_NOTICE, "tls: %s: handshake failed: its certificate "
		    "is refused: %s (it must be signed by [famd] tls_ca)",
		    s->peer, X509_verify_cert_error_string(vr));
		ERR_clear_error();
		return -EACCES;
	}
	if (err == SSL_ERROR_SYSCALL && e == 0) {
		log_rl(LOG_NOTICE, "tls: %s: handshake failed: the peer closed "
		    "the connection (does it have [famd] tls = on, and a "
		    "certificate of the same CA?)", s->peer);
		return errno != 0 ? -errno : -ECONNRESET;
	}
	if (tls_cert_refused(ERR_GET_REASON(e)))
		return tls_refused_by_peer(s, e);
	if (tls_not_tls(ERR_GET_REASON(e)))
		log_rl(LOG_NOTICE, "tls: %s: handshake failed: the peer does "
		    "not speak TLS (%s): [famd] tls must be on at both ends",
		    s->peer, ERR_reason_error_string(e));
	else
		log_rl(LOG_NOTICE, "tls: %s: handshake failed: %s", s->peer,
		    tls_err_text(buf, sizeof buf));
	ERR_clear_error();
	return -EPROTO;
}

/*
 * Turns a failed SSL call's result into 0 (end of the stream) or -errno:
 * -EAGAIN when it waits for the socket (*wants_other set when it waits on
 * the other direction than the call's, other_is_read saying which).
 */
static int
tls_fail(struct tls_conn *s, int ret, bool other_is_read, bool *wants_other)
{
	int err = SSL_get_error(s->ssl, ret);
	char buf[256];

	switch (err) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		*wants_other = (err == SSL_ERROR_WANT_READ) == other_is_read;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		break;
	}
	if (!s->ready)
		return tls_handshake_failed(s, err);
	if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
		return errno != 0 ? -errno : 0;
	if (tls_cert_refused(ERR_GET_REASON(ERR_peek_last_error())))
		return tls_refused_by_peer(s, ERR_peek_last_error());
	log_rl(LOG_NOTICE, "tls: %s: %s", s->peer,
	    tls_err_text(buf, sizeof buf));
	ERR_clear_error();
	return -EPROTO;
}

/* Logs the peer's certificate once the handshake is done. */
static void
tls_log_ready(struct tls_conn *s)
{
	X509 *cert = SSL_get1_peer_certificate(s->ssl);
	char subject[256] = "?";

	if (cert != NULL) {
		X509_NAME_oneline(X509_get_subject_name(cert), subject,
		    sizeof subject);
		X509_free(cert);
	}
	log_info("tls: %s: %s %s, peer certificate %s", s->peer,
	    SSL_get_version(s->ssl), SSL_get_cipher_name(s->ssl), subject);
}

/* Drives the handshake on: 0 once done, or what tls_fail() says. */
static int
tls_handshake(struct tls_conn *s, bool other_is_read, bool *wants_other)
{
	int ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_do_handshake(s->ssl);
	if (ret == 1) {
		s->ready = true;
		tls_log_ready(s);
		return 0;
	}
	ret = tls_fail(s, ret, other_is_read, wants_other);
	return ret == 0 ? -ECONNRESET : ret;
}

/*
 * readv(2) through TLS: fills iov in order with the plaintext that has
 * come. Returns the bytes read, 0 at the end of the stream, or -1 with
 * errno (EAGAIN: see tls_wants_write()).
 */
ssize_t
tls_readv(struct tls_conn *s, const struct iovec *iov, int n)
{
	size_t total = 0;
	int rc;

	s->read_wants_write = false;
	if (!s->ready) {
		rc = tls_handshake(s, false, &s->read_wants_write);
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
	}
	for (int i = 0; i < n; i++) {
		uint8_t *base = iov[i].iov_base;
		size_t off = 0, got;

		while (off < iov[i].iov_len) {
			ERR_clear_error();
			errno = 0;
			rc = SSL_read_ex(s->ssl, base + off,
			    iov[i].iov_len - off, &got);
			if (rc == 1) {
				off += got;
				total += got;
				continue;
			}
			rc = tls_fail(s, rc, false, &s->read_wants_write);
			if (total > 0 && (rc == -EAGAIN || rc == 0))
				return (ssize_t)total;
			if (rc == 0)
				return 0;
			errno = -rc;
			return -1;
		}
	}
	return (ssize_t)total;
}

/*
 * writev(2) through TLS: encrypts and sends up to 64 KiB from the front of
 * iov. After EAGAIN, the next call must be given the same bytes first (as
 * writev's caller does: it advances only by what was written). Returns the
 * bytes written, or -1 with errno (EAGAIN: see tls_wants_read()).
 */
ssize_t
tls_writev(struct tls_conn *s, const struct iovec *iov, int n)
{
	size_t w;
	int rc;

	s->write_wants_read = false;
	if (!s->ready) {
		rc = tls_handshake(s, true, &s->write_wants_read);
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
	}
	if (s->wlen == 0) {
		if (s->wbuf == NULL && (s->wbuf = malloc(TLS_WBUF_LEN)) == NULL) {
			errno = ENOMEM;
			return -1;
		}
		for (int i = 0; i < n && s->wlen < TLS_WBUF_LEN; i++) {
			size_t take = iov[i].iov_len;

			if (take > TLS_WBUF_LEN - s->wlen)
				take = TLS_WBUF_LEN - s->wlen;
			memcpy(s->wbuf + s->wlen, iov[i].iov_base, take);
			s->wlen += take;
		}
		if (s->wlen == 0)
			return 0;
	}
	ERR_clear_error();
	errno = 0;
	rc = SSL_write_ex(s->ssl, s->wbuf, s->wlen, &w);
	if (rc == 1) {
		w = s->wlen;
		s->wlen = 0;
		return (ssize_t)w;
	}
	rc = tls_fail(s, rc, true, &s->write_wants_read);
	errno = rc == 0 ? EPIPE : -rc;
	return -1;
}

/* True when the last write's EAGAIN waits for input, not for room. */
bool
tls_wants_read(const struct tls_conn *s)
{
	return s->write_wants_read;
}

/* True when the last read's EAGAIN waits for room to write, not input. */
bool
tls_wants_write(const struct tls_conn *s)
{
	return s->read_wants_write;
}

/*
 * True when decrypted plaintext waits in the record last read (without
 * read-ahead, libssl reads no further than that record from the socket).
 */
bool
tls_pending(const struct tls_conn *s)
{
	return s->ready && SSL_pending(s->ssl) > 0;
}

/* Says close_notify to the peer, once, without waiting for its own. */
void
tls_close_notify(struct tls_conn *s)
{
	if (!s->ready)
		return;
	ERR_clear_error();
	(void)SSL_shutdown(s->ssl);
	ERR_clear_error();
}
