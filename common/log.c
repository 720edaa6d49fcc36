#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *program = "e2b";
static int max_priority = LOG_INFO;
static int journal_prefix;

/* $JOURNAL_STREAM is "DEV:INO" of the journal socket systemd gave us; only
 * trust it when it still describes our stderr (a child may have redirected). */
static int stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return 0;
	if (fstat(STDERR_FILENO, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_init(const char *name)
{
	const char *slash = strrchr(name, '/');

	program = slash ? slash + 1 : name;
	journal_prefix = stderr_is_journal();
}

void log_set_max_priority(int priority)
{
	max_priority = priority;
}

void log_vmsg(int priority, const char *fmt, va_list ap)
{
	char line[4096];

	if (priority > max_priority)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	/* One write per line, so concurrent writers never interleave mid-line. */
	if (journal_prefix)
		fprintf(stderr, "<%d>%s: %s\n", priority, program, line);
	else
		fprintf(stderr, "%s: %s\n", program, line);
}

void log_msg(int priority, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(priority, fmt, ap);
	va_end(ap);
}
