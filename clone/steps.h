/* What the clone step changes in the guest, one function per change; each
 * returns 0 or -errno and changes nothing else. main.c checks everything a
 * request needs before it calls the first of them. */
#ifndef CLONE_STEPS_H
#define CLONE_STEPS_H

#include <stddef.h>
#include <stdint.h>

/* The generation recorded at path ("N\n"); 0 when the file does not exist.
 * -EBADMSG when it holds anything but that. */
int generation_read(const char *path, uint64_t *gen);
/* Records it: write_file_replacing (common/fileio.h), 0644. */
int generation_write(const char *path, uint64_t gen);
/* Removes it (the snapshot is no clone yet); 1 removed, 0 absent. */
int generation_clear(const char *path);

/* RNDADDENTROPY with every bit credited, then RNDRESEEDCRNG, on fd (an open
 * /dev/urandom). Needs CAP_SYS_ADMIN. */
int crng_reseed(int fd, const uint8_t *bytes, size_t len);

/* Steps CLOCK_REALTIME to sec.nsec; *step_ms is how far it moved (host time
 * minus the guest's before the step). Needs CAP_SYS_TIME. */
int clock_step(int64_t sec, long nsec, int64_t *step_ms);

/* A fresh machine-id (from getrandom, so call it after crng_reseed),
 * written over path in place: /etc/machine-id may be a bind mount, which a
 * rename cannot replace. */
int machine_id_renew(const char *path);

/* sethostname(2); name is checked by hostname_valid(). */
int hostname_valid(const char *name, size_t len);
int hostname_set(const char *name, size_t len);

/* Removes a file that must not be cloned; 1 removed, 0 absent. */
int file_forget(const char *path);

#endif
