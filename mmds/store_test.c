/* Unit tests (TAP) for the document store (mmds/store.c) and the answers
 * cached from it: every kind of document change (the watched file, a
 * control PUT, a control PATCH, a copy recovered from systemd's fd store)
 * drops the answers rendered from the document before it, and what does not
 * change the document (an unchanged or invalid file) keeps them. The fd
 * store is real: a datagram socket stands in for systemd's NOTIFY_SOCKET
 * and receives the sealed memfd that store.c hands over. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "answer_cache.h"
#include "document.h"
#include "fdstore.h"
#include "fileio.h"
#include "server.h"
#include "tap.h"

static char dir[] = "/tmp/mmds-store-test.XXXXXX";
static char doc_path[128], notify_path[96];

/* Caches an answer for the document being served; true if it is there. */
static bool prime(struct mmds_server *s)
{
	return answer_cache_put(&s->answers, s->doc_generation, "/", 1, true, "cached", 6) == 0 &&
	       answer_cache_find(&s->answers, s->doc_generation, "/", 1, true);
}

/* Nothing cached from generation `before` is served any more. */
static bool dropped(const struct mmds_server *s, uint64_t before)
{
	return s->doc_generation != before && s->answers.bytes == 0 &&
	       !answer_cache_find(&s->answers, before, "/", 1, true) &&
	       !answer_cache_find(&s->answers, s->doc_generation, "/", 1, true);
}

static int write_doc(const char *text)
{
	return write_file_replacing(doc_path, text, strlen(text), 0644);
}

static bool doc_is(const struct mmds_server *s, const char *want)
{
	return s->doc_json && strcmp(s->doc_json, want) == 0;
}

/* The memfd store.c handed to "systemd" last (-1 if none). */
static int received_fd(int sock)
{
	int fd = -1;
	for (;;) {
		char buf[256], cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		if (recvmsg(sock, &m, MSG_DONTWAIT) < 0)
			return fd;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		if (c && c->cmsg_type == SCM_RIGHTS) {
			if (fd >= 0)
				close(fd);
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
		}
	}
}

static void test_changes(int notify)
{
	struct mmds_server s = { 0 };
	struct mmds_load_error err;
	uint64_t gen;

	s.cfg.max_size = 51200;
	s.cfg.document_path = doc_path;

	ok(write_doc("{\"a\": 1}") == 0 && mmds_store_load_file(&s, false, &err) == 0 && doc_is(&s, "{\"a\":1}"),
	   "file: first document");
	gen = s.doc_generation;
	ok(prime(&s) && write_doc("{\"a\": 2}") == 0 && mmds_store_load_file(&s, true, &err) == 0 &&
		   doc_is(&s, "{\"a\":2}") && dropped(&s, gen),
	   "file change: answers of the old document dropped");
	gen = s.doc_generation;
	ok(prime(&s) && mmds_store_load_file(&s, true, &err) == 1 && s.doc_generation == gen &&
		   answer_cache_find(&s.answers, gen, "/", 1, true),
	   "unchanged file: same document, answers kept");
	ok(write_doc("{\"a\": ") == 0 && mmds_store_load_file(&s, true, &err) == -EINVAL && doc_is(&s, "{\"a\":2}") &&
		   s.doc_generation == gen && answer_cache_find(&s.answers, gen, "/", 1, true),
	   "invalid file: last document kept, and its answers");

	ok(mmds_store_set(&s, json_pack("{s:s}", "b", "put"), "control PUT") == 0 && doc_is(&s, "{\"b\":\"put\"}") &&
		   dropped(&s, gen),
	   "control PUT: answers of the old document dropped");
	gen = s.doc_generation;
	json_t *patch = json_pack("{s:s}", "c", "patch");
	json_t *merged = doc_merge_patch(s.doc, patch);
	json_decref(patch);
	ok(prime(&s) && merged && mmds_store_set(&s, merged, "control PATCH") == 0 &&
		   doc_is(&s, "{\"b\":\"put\",\"c\":\"patch\"}") && dropped(&s, gen),
	   "control PATCH: answers of the old document dropped");

	/* The fd store: a document kept by "the last run", recovered. */
	s.cfg.fd_store = true;
	ok(mmds_store_set(&s, json_pack("{s:s}", "d", "kept"), "control PUT") == 0 && s.fdstore_generation == 1,
	   "fd store: the document handed over");
	int kept = received_fd(notify);
	ok(kept >= 0, "fd store: the sealed memfd arrived");
	ok(mmds_store_set(&s, json_pack("{s:s}", "e", "newer"), "control PUT") == 0, "a newer document");
	(void)received_fd(notify);
	gen = s.doc_generation;
	s.fdstore_generation = 0; /* as at a start: nothing taken from the store yet */
	ok(prime(&s) && mmds_store_recover(&s, kept, 7, &err) == 1 && doc_is(&s, "{\"d\":\"kept\"}") &&
		   dropped(&s, gen),
	   "fd store recovery: answers of the old document dropped");
	answer_cache_clear(&s.answers);
	json_decref(s.doc);
	free(s.doc_json);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	snprintf(doc_path, sizeof(doc_path), "%s/document.json", dir);
	snprintf(notify_path, sizeof(notify_path), "%s/notify", dir);
	int notify = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", notify_path);
	if (notify < 0 || bind(notify, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return 1;
	setenv("NOTIFY_SOCKET", notify_path, 1);

	test_changes(notify);

	close(notify);
	unlink(notify_path);
	unlink(doc_path);
	rmdir(dir);
	return tap_done();
}
