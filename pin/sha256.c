#include "sha256.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fileio.h"

int sha256_init(struct sha256 *h)
{
	EVP_MD_CTX *ctx = h->ctx ? h->ctx : EVP_MD_CTX_new();

	if (!ctx)
		return -ENOMEM;
	h->ctx = ctx;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		return -EIO;
	return 0;
}

int sha256_update(struct sha256 *h, const void *data, size_t len)
{
	return EVP_DigestUpdate(h->ctx, data, len) == 1 ? 0 : -EIO;
}

int sha256_final_hex(struct sha256 *h, char hex[SHA256_HEX_SIZE])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (EVP_DigestFinal_ex(h->ctx, md, &len) != 1 || len != 32)
		return -EIO;
	for (unsigned i = 0; i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
	return 0;
}

void sha256_free(struct sha256 *h)
{
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

int sha256_fd(int fd, int out_fd, unsigned long long max_bytes, char hex[SHA256_HEX_SIZE],
	      unsigned long long *bytes, int *read_failed)
{
	enum { BUF = 1 << 17 }; /* fits in L2: hashing reads what read(2) just wrote */
	struct sha256 h = { 0 };
	unsigned long long total = 0;
	char *buf = malloc(BUF);
	int r;

	*read_failed = 0;
	if (!buf)
		return -ENOMEM;
	r = sha256_init(&h);
	while (r == 0) {
		ssize_t n = read(fd, buf, BUF);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			*read_failed = 1;
			break;
		}
		if (n == 0)
			break;
		total += (unsigned long long)n;
		if (total > max_bytes) {
			r = -EFBIG;
			break;
		}
		r = sha256_update(&h, buf, (size_t)n);
		if (r == 0 && out_fd >= 0)
			r = write_all(out_fd, buf, (size_t)n);
	}
	if (r == 0)
		r = sha256_final_hex(&h, hex);
	*bytes = total;
	sha256_free(&h);
	free(buf);
	return r;
}
