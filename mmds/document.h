/* The metadata document: parsing with its size rule, RFC 7396 merge patch,
 * JSON Pointer lookup with Firecracker's path rules, and the IMDS text form.
 * Pure functions over jansson values, so tests and the fuzzer reach them. */
#ifndef MMDS_DOCUMENT_H
#define MMDS_DOCUMENT_H

#include <stddef.h>
#include <jansson.h>

#define DOC_DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)

/* Parses any JSON value; -EINVAL if it is not JSON (err, if given, says
 * where), -EFBIG if its compact
 * form is over max_size bytes (Firecracker measures the serialized store). */
int doc_parse(const char *buf, size_t len, size_t max_size, json_t **out, json_error_t *err);

/* Compact, key-sorted serialization; *out is malloc'd. */
int doc_dump(const json_t *v, char **out, size_t *out_len);

/* RFC 7396: returns the patched value (a new reference; target untouched). */
json_t *doc_merge_patch(const json_t *target, const json_t *patch);

/* Resolves a request path: runs of '/' collapse to one, one trailing '/' is
 * dropped, the rest is a JSON Pointer (~1 is '/', ~0 is '~').
 * Returns a borrowed reference, or NULL when nothing is there. */
json_t *doc_lookup(json_t *root, const char *path, size_t len);

/* IMDS text: an object's keys sorted, one a line, '/' after object values,
 * no trailing newline; a string raw. Other types: -EOPNOTSUPP (501). */
int doc_render_imds(const json_t *v, char **out, size_t *out_len);

#endif
