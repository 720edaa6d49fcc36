/* The transfer layer: one artifact from one URL through libcurl, hashed with
 * SHA-256 as it arrives and written to a file descriptor in the same pass.
 *
 * Policy (see pin/README.md): TLS verification is always on; http:// only to
 * loopback or with allow_http; file:// only for mirrors; redirects are
 * followed here, one hop at a time, so each hop gets the same checks, and a
 * redirect never goes from https to anything but https. */
#ifndef PIN_FETCH_H
#define PIN_FETCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "sha256.h"

#define FETCH_MAX_REDIRECTS 10

enum fetch_source { SOURCE_CANONICAL, SOURCE_MIRROR };

struct fetch_opts {
	bool allow_http;
	long timeout;        /* seconds: connect timeout, and stall (no bytes) limit */
	uint64_t max_size;   /* cap on the body */
	bool has_size;       /* the pin knows the exact size */
	uint64_t size;
	const char *ca_file; /* extra trust: replaces the system bundle; NULL = system */
	bool progress;       /* draw a progress bar on stderr */
	const char *label;   /* for the progress bar */
};

/* What went wrong, for the caller's one-line message. */
enum fetch_failure {
	FETCH_OK,
	FETCH_POLICY,   /* URL or redirect refused before any byte was trusted */
	FETCH_REMOTE,   /* the source: HTTP error, truncation, timeout, TLS, redirects */
	FETCH_TOO_BIG,  /* over the size cap or larger than the pinned size */
	FETCH_LOCAL,    /* writing our file failed (disk full...): no other source helps */
};

struct fetch_result {
	uint64_t bytes;
	char sha256[SHA256_HEX_SIZE];
	enum fetch_failure failure;
	char detail[512];
	char final_url[1024]; /* after redirects */
};

/* Set from a signal handler: the transfer stops within about a second and
 * fails with FETCH_LOCAL "interrupted", so the caller can clean up. */
extern volatile sig_atomic_t fetch_interrupted;

int fetch_global_init(void);
void fetch_global_cleanup(void);

/* 0 if allowed; else -EPERM with *why filled. from_scheme is the scheme of the
 * URL that redirected here, NULL for a first request. */
int fetch_url_allowed(const char *url, enum fetch_source source, bool allow_http, const char *from_scheme,
		      char *why, size_t why_len);

/* Downloads url into fd (fd < 0: hash only). fd must be empty. On failure
 * returns a negative errno and fills res->failure and res->detail. */
int fetch_url(const char *url, enum fetch_source source, int fd, const struct fetch_opts *opts,
	      struct fetch_result *res);

#endif
