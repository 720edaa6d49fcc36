/* SHA-256 through OpenSSL's EVP interface (SHA-NI/AVX2 code paths). */
#ifndef PIN_SHA256_H
#define PIN_SHA256_H

#include <stddef.h>

#define SHA256_HEX_SIZE 65

struct sha256 {
	void *ctx; /* EVP_MD_CTX */
};

int sha256_init(struct sha256 *h);
int sha256_update(struct sha256 *h, const void *data, size_t len);
/* Writes 64 lowercase hex digits and a NUL; the context can be re-initialised. */
int sha256_final_hex(struct sha256 *h, char hex[SHA256_HEX_SIZE]);
void sha256_free(struct sha256 *h);

/* Hashes what is left of fd (read to EOF) into hex, counting bytes; stops
 * with -EFBIG past max_bytes. With out_fd >= 0 also copies the data there
 * (write errors come back as their -errno, read errors as -EIO-ish -errno
 * with *read_failed set). */
int sha256_fd(int fd, int out_fd, unsigned long long max_bytes, char hex[SHA256_HEX_SIZE],
	      unsigned long long *bytes, int *read_failed);

#endif
