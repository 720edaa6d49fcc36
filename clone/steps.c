/* See steps.h. */
#include "steps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/random.h>

#include "cleanup.h"
#include "decimal.h"
#include "fileio.h"

int generation_read(const char *path, uint64_t *gen)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_small_file(path, 32, &text, &len);

	if (r == -ENOENT) {
		*gen = 0;
		return 0;
	}
	if (r == -EFBIG)
		return -EBADMSG;
	if (r < 0)
		return r;
	if (len < 2 || text[len - 1] != '\n')
		return -EBADMSG;
	text[len - 1] = '\0';
	return parse_decimal(text, 0, INT64_MAX, gen) < 0 ? -EBADMSG : 0;
}

int generation_write(const char *path, uint64_t gen)
{
	char text[32];
	int n = snprintf(text, sizeof(text), "%llu\n", (unsigned long long)gen);

	return write_file_replacing(path, text, (size_t)n, 0644);
}

int file_forget(const char *path)
{
	if (unlink(path) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

int generation_clear(const char *path)
{
	return file_forget(path);
}

int crng_reseed(int fd, const uint8_t *bytes, size_t len)
{
	/* struct rand_pool_info ends in a flexible array of __u32. */
	union {
		struct rand_pool_info info;
		uint8_t raw[sizeof(struct rand_pool_info) + 512];
	} u;

	if (len > sizeof(u.raw) - sizeof(struct rand_pool_info))
		return -E2BIG;
	memset(&u, 0, sizeof(u));
	u.info.entropy_count = (int)(len * 8);
	u.info.buf_size = (int)len;
	memcpy(u.info.buf, bytes, len);
	int r = ioctl(fd, RNDADDENTROPY, &u.info) < 0 ? -errno : 0;
	memset(&u, 0, sizeof(u)); /* the seed does not linger on the stack */
	if (r < 0)
		return r;
	return ioctl(fd, RNDRESEEDCRNG) < 0 ? -errno : 0;
}

int clock_step(int64_t sec, long nsec, int64_t *step_ms)
{
	struct timespec before, host = { .tv_sec = (time_t)sec, .tv_nsec = nsec };

	if (clock_gettime(CLOCK_REALTIME, &before) < 0)
		return -errno;
	if (clock_settime(CLOCK_REALTIME, &host) < 0)
		return -errno;
	*step_ms = (sec - (int64_t)before.tv_sec) * 1000 + (nsec - before.tv_nsec) / 1000000;
	return 0;
}

int machine_id_renew(const char *path)
{
	uint8_t id[16];
	char text[34];

	if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id))
		return -EIO;
	/* A v4 UUID's version and variant bits, as systemd-id128 new sets them. */
	id[6] = (uint8_t)((id[6] & 0x0f) | 0x40);
	id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(text + 2 * i, 3, "%02x", id[i]);
	text[32] = '\n';
	/* systemd keeps it 0444; root may write it only as its owner, having
	 * no CAP_DAC_OVERRIDE here: read-only again when done. */
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	bool unlocked = !(st.st_mode & S_IWUSR) && chmod(path, (st.st_mode & 07777) | S_IWUSR) == 0;
	int r = 0;
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	/* One 33-byte write at offset 0: a reader sees the old id or the new. */
	if (fd < 0)
		r = -errno;
	else if (pwrite(fd, text, 33, 0) != 33)
		r = errno ? -errno : -EIO;
	else if (ftruncate(fd, 33) < 0)
		r = -errno;
	if (fd >= 0)
		close(fd);
	if (unlocked)
		(void)chmod(path, st.st_mode & 07777);
	return r;
}

int hostname_valid(const char *name, size_t len)
{
	/* RFC 1123 labels: letters, digits, '-' inside, '.' between. */
	if (len == 0 || len > 64 || name[0] == '-' || name[0] == '.' || name[len - 1] == '-' || name[len - 1] == '.')
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && c != '-' && c != '.')
			return -EINVAL;
		if (c == '.' && name[i + 1] == '.')
			return -EINVAL;
	}
	return 0;
}

int hostname_set(const char *name, size_t len)
{
	int r = hostname_valid(name, len);
	if (r < 0)
		return r;
	return sethostname(name, len) < 0 ? -errno : 0;
}
