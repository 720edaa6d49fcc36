/* envd (and other guest HTTP ports) from the host, through the relays:
 * /health, POST /init, and a call that proves the access token. Each
 * exchange ends by link_end(link). */
#ifndef HOSTLINK_ENVD_H
#define HOSTLINK_ENVD_H

#include <stddef.h>
#include <stdint.h>

#include "link.h"

/* GET /health on guest 127.0.0.1:port every 50 ms until it answers 204
 * (envd) or 200 (any other port), each attempt at most 2 s, all by
 * link_end(base). 0; or -ETIMEDOUT with the last real failure in `why`.
 * *tries counts the attempts. */
int envd_wait_health(const struct link *base, uint16_t port, unsigned *tries, char *why, size_t why_len);

/* POST /init with the body (init_args.h). 0 on 204; -EACCES on 401 (the
 * token does not match the document's accessTokenHash), -EPROTO on any
 * other answer, -errno when none came; `why` says which, with envd's words
 * escaped. */
int envd_post_init(const struct link *link, const char *body, size_t body_len, char *why, size_t why_len);

/* filesystem.Filesystem/Stat of the default workdir (the user's home when
 * none was set) with X-Access-Token: the call proves that envd takes the
 * token and that its default user and workdir exist. 0 on 200; -EACCES on
 * 401 (a refused token, or envd's "invalid default user"), -EPROTO on any
 * other answer, -errno when none came. */
int envd_check_token(const struct link *link, const char *token, char *why, size_t why_len);

#endif
