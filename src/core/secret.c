/* SPDX-License-Identifier: Apache-2.0 */
/*
 * secret.c - reads the shared secret that peers present in their hello.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
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
