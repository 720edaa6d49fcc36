/* The document kept in systemd's file-descriptor store, so that it survives
 * a restart of the service (a crash, an OOM kill, `systemctl restart`)
 * without the service writing anything anywhere: each document goes into a
 * sealed memfd handed to systemd (FDSTORE=1), which passes it back at the
 * next start (LISTEN_FDNAMES). The unit sets FileDescriptorStoreMax=.
 *
 * A stored document is named mmds-document-<generation>; the new one is
 * stored before the old one is removed, so a crash in between leaves two,
 * and the higher generation wins. Its content:
 *     mmds-fdstore 1\n
 *     <dev> <ino> <size> <mtime_ns>\n      the document file as last read
 *     <compact JSON>
 * The file's stamp tells, at the next start, whether the file changed while
 * the service was down (then the file is newer and wins). */
#include "fdstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cleanup.h"
#include "fileio.h"

#define MAGIC "mmds-fdstore 1\n"
#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

int mmds_fdstore_generation(const char *name, uint64_t *generation)
{
	size_t plen = strlen(MMDS_FDSTORE_PREFIX);
	char *end;

	if (!name || strncmp(name, MMDS_FDSTORE_PREFIX, plen) != 0)
		return -ENOENT;
	const char *digits = name + plen;
	if (*digits < '0' || *digits > '9')
		return -EINVAL;
	errno = 0;
	unsigned long long g = strtoull(digits, &end, 10);
	if (errno || *end || g == 0)
		return -EINVAL;
	*generation = g;
	return 0;
}

static int notify_remove(uint64_t generation)
{
	char msg[96];
	snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s%" PRIu64, MMDS_FDSTORE_PREFIX, generation);
	return sd_notify(0, msg);
}

int mmds_fdstore_save(const struct mmds_fdstore_entry *e, uint64_t previous)
{
	char head[160], msg[96];
	int n = snprintf(head, sizeof(head), MAGIC "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 "\n",
			 e->stamp.dev, e->stamp.ino, e->stamp.size, e->stamp.mtime_ns);
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s%" PRIu64, MMDS_FDSTORE_PREFIX, e->generation);

	_cleanup_close_ int fd = memfd_create("mmds-document", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, head, (size_t)n);
	if (r == 0)
		r = write_all(fd, e->json, e->json_len);
	if (r < 0)
		return r;
	if (fcntl(fd, F_ADD_SEALS, SEALS) < 0)
		return -errno;
	r = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
	if (r <= 0)
		return r < 0 ? r : -ENOTCONN; /* 0: no NOTIFY_SOCKET, nobody to keep it */
	return previous ? notify_remove(previous) : 0;
}

int mmds_fdstore_drop(uint64_t generation)
{
	return notify_remove(generation);
}

/* The whole memfd, which must be sealed against writes: a store entry
 * nobody can change under us. */
static int read_sealed(int fd, size_t max, char **out, size_t *out_len)
{
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return -errno;
	if ((seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW))
		return -EPERM;
	off_t size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		return -errno;
	if ((uint64_t)size > max)
		return -EFBIG;
	_cleanup_free_ char *buf = malloc((size_t)size + 1);
	if (!buf)
		return -ENOMEM;
	size_t got = 0;
	while (got < (size_t)size) {
		ssize_t n = pread(fd, buf + got, (size_t)size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = TAKE_PTR(buf);
	*out_len = got;
	return 0;
}

int mmds_fdstore_read(int fd, size_t max_json, struct mmds_fdstore_entry *e, char **buf)
{
	size_t len = 0;
	int r = read_sealed(fd, max_json + 160, buf, &len);
	if (r < 0)
		return r;
	char *p = *buf;
	size_t mlen = strlen(MAGIC);
	if (len < mlen || memcmp(p, MAGIC, mlen) != 0)
		return -EBADMSG;
	p += mlen;
	char *nl = memchr(p, '\n', len - mlen);
	int consumed = 0;
	if (!nl || sscanf(p, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNd64 "%n", &e->stamp.dev,
			  &e->stamp.ino, &e->stamp.size, &e->stamp.mtime_ns, &consumed) != 4 ||
	    p + consumed != nl)
		return -EBADMSG;
	e->json = nl + 1;
	e->json_len = len - (size_t)(e->json - *buf);
	return 0;
}
