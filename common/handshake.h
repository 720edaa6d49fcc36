/* The one-line vsock handshakes, both ends:
 *
 *   Firecracker / cloud-hypervisor hybrid vsock (host side of the VMM's unix
 *   socket):  host -> "CONNECT <vsock port>\n",  VMM -> "OK <host port>\n"
 *             (on failure the VMM closes the connection without a word);
 *   vsock-relay (guest, vsock port 10000):
 *             host -> "CONNECT <loopback port>\n", relay -> "OK\n" or
 *             "ERR <one line saying why>\n" and close.
 *
 * Parsers return the bytes consumed (> 0) once a whole line is there, 0 while
 * it is incomplete (more may come), or -errno with one sentence in `why`. */
#ifndef E2B_HANDSHAKE_H
#define E2B_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longer than any valid line ("CONNECT 4294967295\n" is 19 bytes, "OK" plus
 * a port 14); replies with "ERR " may use the rest. */
#define HANDSHAKE_LINE_MAX 256

/* "CONNECT <port>\n", port 1..max_port in plain decimal (no sign, no leading
 * zero, no spaces but the one). -EINVAL: malformed; -ERANGE: out of range. */
int handshake_parse_connect(const char *buf, size_t len, uint32_t max_port, uint32_t *port,
			    char *why, size_t why_len);

/* "OK <n>\n" (want_number) or "OK\n"; "ERR <text>\n" gives -ECONNREFUSED with
 * the text in why; anything else -EPROTO. */
int handshake_parse_reply(const char *buf, size_t len, bool want_number, uint32_t *number,
			  char *why, size_t why_len);

/* "CONNECT <port>\n" into buf; its length, or -ENOSPC. */
int handshake_format_connect(char *buf, size_t len, uint32_t port);

#endif
