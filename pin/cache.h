/* The content-addressed cache, laid out like a mirror:
 *
 *   DIR/sha256/<64 hex>       the artifact, mode 0644, only ever renamed in whole
 *   DIR/tree/<64 hex>         an archive whose unpacked tree has this tree pin
 *                             (the NAR hash's hex), likewise
 *   DIR/locks/<64 hex>.lock   flock(2)ed while one process checks or fills the entry
 *
 * so a copy of DIR/ served over https or file:// is a --mirror. Entries are
 * never trusted: every hit is hashed again as it is copied out. */
#ifndef PIN_CACHE_H
#define PIN_CACHE_H

struct cache {
	char *dir;     /* DIR */
	char *entries; /* DIR/sha256 or DIR/tree */
	int entries_fd;
	int locks_fd;
};

#define CACHE_INIT { .entries_fd = -1, .locks_fd = -1 }

/* Creates DIR, DIR/KIND ("sha256" or "tree") and DIR/locks as needed. */
int cache_open(struct cache *c, const char *dir, const char *kind);
void cache_close(struct cache *c);
/* Blocks until this process owns the entry; returns the lock's fd (close it to release). */
int cache_lock_entry(struct cache *c, const char *hex);
/* An fd for reading the entry, or -ENOENT. */
int cache_open_entry(struct cache *c, const char *hex);
int cache_drop_entry(struct cache *c, const char *hex);
/* DIR/KIND/<hex>, malloc'ed. */
char *cache_entry_path(const struct cache *c, const char *hex);

/* mkdir -p with mode 0755. */
int mkdir_parents(const char *path);

#endif
