#include "fetch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "fileio.h"

/* libcurl reads at most this much per callback; bigger means fewer hash and
 * write calls per byte (CURL_MAX_READ_SIZE). */
#define RECV_BUFFER (512 * 1024)

volatile sig_atomic_t fetch_interrupted;

int fetch_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

void fetch_global_cleanup(void)
{
	curl_global_cleanup();
}

__attribute__((format(printf, 3, 4)))
static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static bool host_is_loopback(const char *host)
{
	char v6[INET6_ADDRSTRLEN + 2];
	struct in6_addr a6;
	struct in_addr a4;
	size_t n = strlen(host);

	/* libcurl resolves "localhost" to loopback itself, never through DNS. */
	if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (n > 2 && n < sizeof(v6) && host[0] == '[' && host[n - 1] == ']') {
		memcpy(v6, host + 1, n - 2);
		v6[n - 2] = '\0';
		return inet_pton(AF_INET6, v6, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
	}
	return false;
}

/* The scheme of url, lowercase, into out; -EINVAL if unparsable. */
static int url_parts(const char *url, char *scheme, size_t scheme_len, char *host, size_t host_len)
{
	CURLU *u = curl_url();
	char *s = NULL, *h = NULL;
	int r = -EINVAL;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
		goto out;
	if (curl_url_get(u, CURLUPART_SCHEME, &s, 0) != CURLUE_OK)
		goto out;
	if (curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK)
		h = NULL;
	if (strlen(s) >= scheme_len || (h && strlen(h) >= host_len))
		goto out;
	strcpy(scheme, s);
	strcpy(host, h ? h : "");
	r = 0;
out:
	curl_free(s);
	curl_free(h);
	curl_url_cleanup(u);
	return r;
}

int fetch_url_allowed(const char *url, enum fetch_source source, bool allow_http, const char *from_scheme,
		      char *why, size_t why_len)
{
	char scheme[16], host[256];

	if (url_parts(url, scheme, sizeof(scheme), host, sizeof(host)) < 0) {
		say(why, why_len, "not a valid URL");
		return -EPERM;
	}
	if (strcmp(scheme, "https") == 0)
		return 0;
	if (strcmp(scheme, "http") == 0) {
		if (from_scheme && strcmp(from_scheme, "https") == 0) {
			say(why, why_len, "redirect from https to plain http refused");
			return -EPERM;
		}
		if (host_is_loopback(host) || allow_http)
			return 0;
		say(why, why_len, "plain http to %s refused (not loopback); use https or pass --allow-http", host);
		return -EPERM;
	}
	if (strcmp(scheme, "file") == 0) {
		if (from_scheme) {
			say(why, why_len, "redirect to file:// refused");
			return -EPERM;
		}
		if (source != SOURCE_MIRROR) {
			say(why, why_len, "file:// is only allowed for --mirror");
			return -EPERM;
		}
		if (*host && strcasecmp(host, "localhost") != 0) {
			say(why, why_len, "file:// URL names a remote host");
			return -EPERM;
		}
		return 0;
	}
	say(why, why_len, "scheme %s:// is not supported (https, loopback http, file:// mirrors)", scheme);
	return -EPERM;
}

struct transfer {
	CURL *curl;
	int fd;
	const struct fetch_opts *opts;
	struct sha256 hash;
	uint64_t bytes;
	long status;
	bool status_known;
	bool discard; /* a redirect's body */
	enum fetch_failure failure;
	int local_errno;
	char detail[256];
	/* progress bar */
	struct timespec last_draw;
	bool drawn;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct transfer *t = userdata;
	size_t n = size * nmemb;
	uint64_t limit = t->opts->has_size ? t->opts->size : t->opts->max_size;
	int r;

	if (fetch_interrupted) {
		t->failure = FETCH_LOCAL;
		snprintf(t->detail, sizeof(t->detail), "interrupted");
		return CURL_WRITEFUNC_ERROR;
	}
	if (!t->status_known) {
		curl_off_t announced = -1;

		t->status_known = true;
		curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
		t->discard = t->status >= 300 && t->status < 400;
		curl_easy_getinfo(t->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
		if (!t->discard && t->opts->has_size && announced >= 0 && (uint64_t)announced != t->opts->size) {
			t->failure = FETCH_REMOTE;
			snprintf(t->detail, sizeof(t->detail),
				 "size mismatch: the server announces %lld bytes, the pin says %llu",
				 (long long)announced, (unsigned long long)t->opts->size);
			return CURL_WRITEFUNC_ERROR;
		}
	}
	if (t->discard)
		return n;
	if (n > limit - t->bytes || t->bytes > limit) {
		t->failure = FETCH_TOO_BIG;
		if (t->opts->has_size)
			snprintf(t->detail, sizeof(t->detail), "size mismatch: more than the pinned %llu bytes",
				 (unsigned long long)limit);
		else
			snprintf(t->detail, sizeof(t->detail), "larger than the size cap of %llu bytes (--max-size)",
				 (unsigned long long)limit);
		return CURL_WRITEFUNC_ERROR;
	}
	if (sha256_update(&t->hash, data, n) < 0) {
		t->failure = FETCH_LOCAL;
		snprintf(t->detail, sizeof(t->detail), "hashing failed");
		return CURL_WRITEFUNC_ERROR;
	}
	if (t->fd >= 0 && (r = write_all(t->fd, data, n)) < 0) {
		t->failure = FETCH_LOCAL;
		t->local_errno = -r;
		snprintf(t->detail, sizeof(t->detail), "writing the temporary file: %s%s", strerror(-r),
			 r == -ENOSPC || r == -EDQUOT ? " (disk full)" : "");
		return CURL_WRITEFUNC_ERROR;
	}
	t->bytes += n;
	return n;
}

static void fmt_bytes(char *buf, size_t len, double b)
{
	if (b >= 1024.0 * 1024 * 1024)
		snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
	else if (b >= 1024.0 * 1024)
		snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024));
	else
		snprintf(buf, len, "%.0f KiB", b / 1024.0);
}

/* A one-line bar redrawn in place, at most ten times a second. */
static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct transfer *t = userdata;
	struct timespec now;
	char have[32], total[32], bar[31];
	curl_off_t rate = 0;
	int pct = -1;

	/* libcurl calls this about once a second even on a silent connection,
	 * which is what lets a signal stop a stalled transfer. */
	if (fetch_interrupted) {
		t->failure = FETCH_LOCAL;
		snprintf(t->detail, sizeof(t->detail), "interrupted");
		return 1;
	}
	if (t->discard || !t->opts->progress)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (t->drawn && (now.tv_sec - t->last_draw.tv_sec) * 1000000000L + (now.tv_nsec - t->last_draw.tv_nsec) <
				100000000L)
		return 0;
	t->last_draw = now;
	t->drawn = true;
	curl_easy_getinfo(t->curl, CURLINFO_SPEED_DOWNLOAD_T, &rate);
	fmt_bytes(have, sizeof(have), (double)dlnow);
	if (dltotal > 0) {
		pct = (int)(dlnow * 100 / dltotal);
		fmt_bytes(total, sizeof(total), (double)dltotal);
	} else {
		snprintf(total, sizeof(total), "?");
	}
	int fill = pct < 0 ? 0 : pct * 30 / 100;
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = '\0';
	if (pct >= 0)
		fprintf(stderr, "\r%.24s [%s] %3d%% %s / %s %.1f MiB/s\033[K", t->opts->label ? t->opts->label : "",
			bar, pct, have, total, (double)rate / (1024 * 1024));
	else
		fprintf(stderr, "\r%.24s %s %.1f MiB/s\033[K", t->opts->label ? t->opts->label : "", have,
			(double)rate / (1024 * 1024));
	return 0;
}

static void describe_curl_error(struct transfer *t, CURLcode rc, const char *errbuf, struct fetch_result *res)
{
	curl_off_t announced = -1;

	res->failure = FETCH_REMOTE;
	switch (rc) {
	case CURLE_WRITE_ERROR:
	case CURLE_ABORTED_BY_CALLBACK:
		if (t->failure != FETCH_OK) {
			res->failure = t->failure;
			say(res->detail, sizeof(res->detail), "%s", t->detail);
			return;
		}
		break;
	case CURLE_HTTP_RETURNED_ERROR:
		curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
		say(res->detail, sizeof(res->detail), "HTTP %ld", t->status);
		return;
	case CURLE_PARTIAL_FILE:
		curl_easy_getinfo(t->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
		say(res->detail, sizeof(res->detail), "truncated body: received %llu of %lld bytes",
		    (unsigned long long)t->bytes, (long long)announced);
		return;
	case CURLE_OPERATION_TIMEDOUT:
		say(res->detail, sizeof(res->detail), "timed out: %s (--timeout %ld)", errbuf, t->opts->timeout);
		return;
	case CURLE_FILESIZE_EXCEEDED:
		res->failure = FETCH_TOO_BIG;
		say(res->detail, sizeof(res->detail), "larger than the size cap of %llu bytes (--max-size)",
		    (unsigned long long)t->opts->max_size);
		return;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CONNECT_ERROR:
		say(res->detail, sizeof(res->detail), "TLS verification failed: %s", *errbuf ? errbuf : curl_easy_strerror(rc));
		return;
	default:
		break;
	}
	say(res->detail, sizeof(res->detail), "%s", *errbuf ? errbuf : curl_easy_strerror(rc));
}

int fetch_url(const char *url, enum fetch_source source, int fd, const struct fetch_opts *opts,
	      struct fetch_result *res)
{
	struct transfer t = { .fd = fd, .opts = opts };
	char errbuf[CURL_ERROR_SIZE], why[256], scheme[16], host[256], prev_scheme[16] = "";
	char *current = strdup(url);
	int r = -EIO;

	memset(res, 0, sizeof(*res));
	if (!current)
		return -ENOMEM;
	t.curl = curl_easy_init();
	if (!t.curl || sha256_init(&t.hash) < 0) {
		free(current);
		curl_easy_cleanup(t.curl);
		res->failure = FETCH_LOCAL;
		say(res->detail, sizeof(res->detail), "cannot initialise libcurl");
		return -ENOMEM;
	}

	for (int hops = 0;; hops++) {
		CURLcode rc;

		if (hops > FETCH_MAX_REDIRECTS) {
			res->failure = FETCH_REMOTE;
			say(res->detail, sizeof(res->detail), "too many redirects (more than %d)", FETCH_MAX_REDIRECTS);
			r = -ELOOP;
			goto out;
		}
		if (fetch_url_allowed(current, source, opts->allow_http, hops ? prev_scheme : NULL, why,
				      sizeof(why)) < 0 ||
		    url_parts(current, scheme, sizeof(scheme), host, sizeof(host)) < 0) {
			res->failure = FETCH_POLICY;
			say(res->detail, sizeof(res->detail), "%s%s%s", hops ? "redirect to " : "",
			    hops ? current : "", hops ? ": " : "");
			strncat(res->detail, why, sizeof(res->detail) - strlen(res->detail) - 1);
			r = -EPERM;
			goto out;
		}
		snprintf(res->final_url, sizeof(res->final_url), "%s", current);

		curl_easy_reset(t.curl);
		errbuf[0] = '\0';
		t.status = 0;
		t.status_known = false;
		t.discard = false;
		/* Only this hop's scheme; redirects are ours to check, not libcurl's. */
		curl_easy_setopt(t.curl, CURLOPT_URL, current);
		curl_easy_setopt(t.curl, CURLOPT_PROTOCOLS_STR, scheme);
		curl_easy_setopt(t.curl, CURLOPT_REDIR_PROTOCOLS_STR, scheme);
		curl_easy_setopt(t.curl, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(t.curl, CURLOPT_SSL_VERIFYPEER, 1L);
		curl_easy_setopt(t.curl, CURLOPT_SSL_VERIFYHOST, 2L);
		if (opts->ca_file)
			curl_easy_setopt(t.curl, CURLOPT_CAINFO, opts->ca_file);
		if (strcmp(scheme, "http") == 0 && host_is_loopback(host))
			curl_easy_setopt(t.curl, CURLOPT_PROXY, ""); /* never hand loopback to a proxy */
		curl_easy_setopt(t.curl, CURLOPT_FAILONERROR, 1L);
		curl_easy_setopt(t.curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(t.curl, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(t.curl, CURLOPT_USERAGENT, "pinfetch/1");
		curl_easy_setopt(t.curl, CURLOPT_BUFFERSIZE, (long)RECV_BUFFER);
		curl_easy_setopt(t.curl, CURLOPT_CONNECTTIMEOUT, opts->timeout);
		/* A stall, not a slow link, is what times out: under 1 byte/s for
		 * the whole --timeout window. */
		curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(t.curl, CURLOPT_LOW_SPEED_TIME, opts->timeout);
		curl_easy_setopt(t.curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)opts->max_size);
		curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &t);
		curl_easy_setopt(t.curl, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(t.curl, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(t.curl, CURLOPT_XFERINFODATA, &t);

		rc = curl_easy_perform(t.curl);
		if (t.drawn) {
			fputs("\r\033[K", stderr);
			t.drawn = false;
		}
		if (rc != CURLE_OK) {
			describe_curl_error(&t, rc, errbuf, res);
			r = res->failure == FETCH_LOCAL ? -(t.local_errno ? t.local_errno : EIO) : -EIO;
			goto out;
		}
		if (!t.status_known)
			curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &t.status);
		if (t.status >= 300 && t.status < 400) {
			char *location = NULL;

			curl_easy_getinfo(t.curl, CURLINFO_REDIRECT_URL, &location);
			if (!location) {
				res->failure = FETCH_REMOTE;
				say(res->detail, sizeof(res->detail), "HTTP %ld without a Location", t.status);
				goto out;
			}
			snprintf(prev_scheme, sizeof(prev_scheme), "%s", scheme);
			free(current);
			current = strdup(location);
			if (!current) {
				r = -ENOMEM;
				goto out;
			}
			continue;
		}
		/* file:// has no status; anything else must be a plain 2xx. */
		if (t.status != 0 && (t.status < 200 || t.status >= 300)) {
			res->failure = FETCH_REMOTE;
			say(res->detail, sizeof(res->detail), "unexpected HTTP status %ld", t.status);
			goto out;
		}
		break;
	}

	if (sha256_final_hex(&t.hash, res->sha256) < 0) {
		res->failure = FETCH_LOCAL;
		say(res->detail, sizeof(res->detail), "hashing failed");
		goto out;
	}
	res->bytes = t.bytes;
	res->failure = FETCH_OK;
	r = 0;
out:
	sha256_free(&t.hash);
	curl_easy_cleanup(t.curl);
	free(current);
	return r;
}
