/* The clone step's request, one per connection, text with a strict grammar
 * (README.md, "Protocol"), sent after the guest's greeting (CLONE_GREETING):
 *
 *   E2B-CLONE/1 clone\n
 *   generation <1..2^63-1>\n
 *   realtime <seconds>.<9 digits>\n        the host's CLOCK_REALTIME
 *   entropy <64..1024 lowercase hex digits, even>\n   32..512 bytes
 *   [document <1..CLONE_MAX_DOCUMENT>\n]
 *   \n
 *   [the document's bytes]
 *
 *   E2B-CLONE/1 status\n\n
 *   E2B-CLONE/1 prepare-snapshot\n\n
 *
 * Fields in this order, each once; no spaces but the one after the name; no
 * \r. Pure: no I/O, fuzzed (request_fuzz.c). */
#ifndef CLONE_REQUEST_H
#define CLONE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#define CLONE_MAGIC "E2B-CLONE/1"
/* The guest's first line on an admitted connection; the host sends its
 * request (and reads its clock) only after it. */
#define CLONE_GREETING CLONE_MAGIC " ready"
#define CLONE_ENTROPY_MIN 32   /* bytes: the CRNG's own seed size */
#define CLONE_ENTROPY_MAX 512  /* RNDADDENTROPY takes more, nothing gains from it */
#define CLONE_MAX_HEAD 2048
#define CLONE_MAX_DOCUMENT (4u * 51200u) /* mmds-serve's raw bound: 4 x --max-size */

enum clone_kind { CLONE_STEP, CLONE_STATUS, CLONE_PREPARE_SNAPSHOT };

struct clone_request {
	enum clone_kind kind;
	uint64_t generation;
	int64_t realtime_sec;
	long realtime_nsec;
	uint8_t entropy[CLONE_ENTROPY_MAX];
	size_t entropy_len;
	const char *document; /* into the parsed buffer; NULL without one */
	size_t document_len;
};

/* Parses buf[0..len). Returns the request's total length (head and
 * document) when complete, 0 when more bytes are needed, -EINVAL with a
 * sentence in `why` naming the bad field (bytes after a complete request are
 * also -EINVAL: one request per connection). */
long clone_request_parse(const char *buf, size_t len, struct clone_request *req, char *why, size_t why_len);

#endif
