/* SPDX-License-Identifier: Apache-2.0 */
/*
 * secret.c - reads the shared secret that peers present in their hello,
 * and a memory node's file of per-peer secrets (peer_secrets).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/famd.h"

#define SECRET_READ_MAX 4096

/*
 * Loads the first line of path (without its line ending) into out. An
 * empty path means no secret: out is empty. The file must be a regular
 * file that others cannot read or write, and the line must hold 1 to
 * FAM_SECRET_MAX characters and no NUL. Returns 0 or -errno with *cause.
 */
int
secret_load(const char *path, char out[FAM_SECRET_MAX + 1], char **cause)
{
	char buf[SECRET_READ_MAX];
	struct stat st;
	size_t len = 0, line;
	int fd, err = 0;

	out[0] = '\0';
	if (path == NULL || *path == '\0')
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		err = -errno;
		*cause = xasprintf("secret_file %s: %s", path, strerror(errno));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		*cause = xasprintf("secret_file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		*cause = xasprintf("secret_file %s: not a regular file", path);
		goto out;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		err = -EPERM;
		*cause = xasprintf("secret_file %s: readable or writable by "
		    "others (mode %04o); chmod o-rw %s", path,
		    (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	while (len < sizeof buf) {
		ssize_t n = read(fd, buf + len, sizeof buf - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			*cause = xasprintf("secret_file %s: %s", path,
			    strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (memchr(buf, '\n', len) != NULL)
			break;
	}
	if (memchr(buf, '\n', len) != NULL)
		line = (size_t)((char *)memchr(buf, '\n', len) - buf);
	else
		line = len;
	if (line > 0 && buf[line - 1] == '\r')
		line--;
	if (line == 0) {
		err = -EINVAL;
		*cause = xasprintf("secret_file %s: the first line is empty",
		    path);
	} else if (line > FAM_SECRET_MAX) {
		err = -EINVAL;
		*cause = xasprintf("secret_file %s: the secret is longer than "
		    "%u characters", path, FAM_SECRET_MAX);
	} else if (memchr(buf, '\0', line) != NULL) {
		err = -EINVAL;
		*cause = xasprintf("secret_file %s: the secret holds a NUL "
		    "byte", path);
	} else {
		memcpy(out, buf, line);
		out[line] = '\0';
	}
out:
	explicit_bzero(buf, sizeof buf);
	close(fd);
	return err;
}

/*
 * Splits one line of a peer_secrets file in place: "NODE SECRET_FILE",
 * blanks around, "#" to the end of the line a comment. Returns 1 with
 * *name and *file, 0 for a line with nothing, or -EINVAL with *why.
 */
int
secret_peer_line(char *line, const char **name, const char **file,
    const char **why)
{
	char *p = strchr(line, '#'), *end;

	if (p != NULL)
		*p = '\0';
	end = line + strlen(line);
	while (end > line && isspace((unsigned char)end[-1]))
		*--end = '\0';
	p = line;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '\0')
		return 0;
	*name = p;
	while (*p != '\0' && !isspace((unsigned char)*p))
		p++;
	if (*p == '\0') {
		*why = "expected NODE SECRET_FILE";
		return -EINVAL;
	}
	*p++ = '\0';
	while (isspace((unsigned char)*p))
		p++;
	*file = p;
	for (const char *q = p; *q != '\0'; q++)
		if (isspace((unsigned char)*q)) {
			*why = "expected NODE SECRET_FILE, nothing after";
			return -EINVAL;
		}
	if (strlen(*name) > FAM_NAME_MAX) {
		*why = "node name longer than 64 characters";
		return -EINVAL;
	}
	if (!proto_utf8_valid(*name, strlen(*name))) {
		*why = "node name not valid UTF-8";
		return -EINVAL;
	}
	if (**file != '/') {
		*why = "SECRET_FILE must be an absolute path";
		return -EINVAL;
	}
	return 1;
}

/* Adds node name's key (from the secret in file) to *keys. */
static int
secret_peer_add(struct fam_peer_key **keys, size_t *n, const char *name,
    const char *file, char **cause)
{
	char secret[FAM_SECRET_MAX + 1];
	struct fam_peer_key *k;
	int err;

	for (size_t i = 0; i < *n; i++)
		if (strcmp((*keys)[i].name, name) == 0) {
			*cause = xasprintf("node %s is listed twice", name);
			return -EINVAL;
		}
	err = secret_load(file, secret, cause);
	if (err < 0)
		return err;
	k = realloc(*keys, (*n + 1) * sizeof *k);
	if (k == NULL) {
		explicit_bzero(secret, sizeof secret);
		*cause = xasprintf("out of memory");
		return -ENOMEM;
	}
	*keys = k;
	k += (*n)++;
	memset(k, 0, sizeof *k);
	snprintf(k->name, sizeof k->name, "%s", name);
	err = proto_auth_secret_key(secret, k->key);
	explicit_bzero(secret, sizeof secret);
	if (err < 0)
		*cause = xasprintf("cannot derive the key of node %s", name);
	return err;
}

/*
 * Loads a peer_secrets file: each node's key, from its secret file (read
 * as secret_load() reads secret_file). An empty path: none. Returns 0, or
 * -errno with *cause naming path:line; *out is the caller's to free.
 */
int
secret_peers_load(const char *path, struct fam_peer_key **out, size_t *n,
    char **cause)
{
	char *line = NULL, *why_cause = NULL;
	const char *name, *file, *why;
	size_t cap = 0;
	unsigned lineno = 0;
	FILE *f;
	int err = 0, rc;

	*out = NULL;
	*n = 0;
	if (path == NULL || *path == '\0')
		return 0;
	f = fopen(path, "re");
	if (f == NULL) {
		err = -errno;
		*cause = xasprintf("peer_secrets %s: %s", path, strerror(errno));
		return err;
	}
	while (err == 0 && getline(&line, &cap, f) >= 0) {
		lineno++;
		rc = secret_peer_line(line, &name, &file, &why);
		if (rc < 0) {
			*cause = xasprintf("peer_secrets %s:%u: %s", path,
			    lineno, why);
			err = rc;
		} else if (rc > 0) {
			err = secret_peer_add(out, n, name, file, &why_cause);
			if (err < 0) {
				*cause = xasprintf("peer_secrets %s:%u: %s",
				    path, lineno, why_cause);
				free(why_cause);
			}
		}
	}
	free(line);
	fclose(f);
	if (err < 0) {
		explicit_bzero(*out, *n * sizeof **out);
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return err;
}
