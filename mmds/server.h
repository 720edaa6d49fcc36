/* The mmds-serve event loop: listeners, connections, the document store. */
#ifndef MMDS_SERVER_H
#define MMDS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <systemd/sd-event.h>

enum empty_mode {
	EMPTY_ERROR,  /* 503, non-JSON: a booting envd keeps polling */
	EMPTY_NULL,   /* Firecracker's own answer: the store is JSON null */
	EMPTY_OBJECT, /* {} */
};

struct config {
	const char *document_path;
	const char *control_path;
	const char *listen;
	bool v1;
	enum empty_mode empty;
	size_t max_size;
	unsigned max_connections;
	uint64_t idle_timeout_usec;
	uint64_t request_timeout_usec;
	size_t max_head;
	unsigned max_headers;
};

struct conn;
struct token_authority;

struct server {
	struct config cfg;
	sd_event *event;
	struct token_authority *tokens;

	json_t *doc;        /* NULL until the first document */
	char *doc_json;     /* compact serialization of doc, served for GET / */
	size_t doc_json_len;
	uint64_t doc_generation;

	/* Guest connections, least recently active first. */
	struct conn *lru_head, *lru_tail;
	unsigned n_guest, n_control;
	sd_event_source *sweep;
	uint64_t sweep_at;
	sd_event_source *listeners[16];
	int n_listeners;
	bool accept_paused;

	char *scratch; /* one read buffer shared by every connection */
	size_t scratch_len;

	uint64_t requests_served;
};

int server_init(struct server *s, const struct config *cfg, sd_event *event);
void server_done(struct server *s);

/* fd: a listening socket; control: speaks the host API, else MMDS. */
int server_add_listener(struct server *s, int fd, bool control);

/* Takes the reference. Re-renders the cached JSON and the sd_notify status. */
int server_set_document(struct server *s, json_t *doc, const char *origin);

/* Reads, validates and swaps in the document file; keeps the old on error. */
int server_load_document_file(struct server *s, int log_priority_on_error);

#endif
