/* The loopback ports envd-guard guards and vsock-relay refuses: the one
 * definition on the C side, used by both tools. The installed image keeps
 * the same list in one file both units read, /etc/e2b/guarded-ports
 * (os-image/mkosi.extra/etc/e2b/guarded-ports: E2B_GUARDED_PORTS=...);
 * tests/relay/test_relay_units.py checks that the file, the units and this
 * header agree. */
#ifndef E2B_GUARDED_PORTS_H
#define E2B_GUARDED_PORTS_H

#include <stddef.h>
#include <stdint.h>

/* envd (49983), the code interpreter (49999), Jupyter (8888, no token). */
#define GUARDED_PORTS_DEFAULT "49983,49999,8888"
#define GUARDED_PORTS_MAX 32
/* The metadata alias's port (169.254.169.254:80): guarded by its own rule,
 * refused by the relay besides the list. */
#define GUARDED_MMDS_PORT 80

/* A comma-separated list of decimal TCP ports ("49983,49999,8888") into
 * ports[GUARDED_PORTS_MAX]. Strict on purpose: a typo here silently unguards
 * a port. 0, or -EINVAL with one sentence (naming the value, "--ports: ...")
 * in why. */
int guarded_ports_parse(const char *text, uint16_t *ports, size_t *n_ports, char *why, size_t why_len);

#endif
