/* Logging to stderr in a form journald understands.
 *
 * Under systemd (stderr connected to the journal, per $JOURNAL_STREAM) every
 * line carries an sd-daemon "<N>" priority prefix; on a terminal or a pipe it
 * is plain "prog: message". Only main() should decide what is worth logging;
 * library code returns -errno. */
#ifndef E2B_LOG_H
#define E2B_LOG_H

#include <stdarg.h>
#include <syslog.h>

void log_init(const char *program);
/* Messages above this priority (LOG_DEBUG > LOG_INFO > ...) are dropped. */
void log_set_max_priority(int priority);

void log_msg(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(int priority, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#define log_error(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...)  log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)   log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
