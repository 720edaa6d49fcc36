/* envd-version: ask the envd an image ships for its version, check it against
 * the lock, and record it in /etc/envd-version for the SDKs. See pin/README.md. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <spawn.h>
#include <sys/pidfd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atomicfile.h"
#include "fileio.h"
#include "cleanup.h"
#include "log.h"
#include "version.h"

#define EXIT_BAD   1
#define EXIT_USAGE 2

#define DEFAULT_TIMEOUT_MS 10000
#define MAX_OUTPUT         4096

static void usage(FILE *f)
{
	fprintf(f, "Usage:\n"
		   "  envd-version --envd PATH --expect X.Y.Z --output ROOT/etc/envd-version [--timeout SECONDS]\n"
		   "  envd-version --check FILE\n"
		   "Exit: 0 ok, 1 bad input (nothing written), 2 usage.\n");
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* s as a short, printable, quoted string for error messages. */
static void quote(const char *s, size_t len, char *out, size_t out_len)
{
	size_t o = 0;

	out[o++] = '"';
	for (size_t i = 0; i < len && o + 8 < out_len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n')
			o += (size_t)snprintf(out + o, out_len - o, "\\n");
		else if (c == '"' || c == '\\')
			o += (size_t)snprintf(out + o, out_len - o, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(out + o, out_len - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
		if (i + 1 < len && o + 8 >= out_len) {
			o += (size_t)snprintf(out + o, out_len - o, "...");
			break;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
}

struct child_result {
	char out[MAX_OUTPUT + 1];
	size_t len;
	bool overflow, timed_out;
	int status;
	int exec_errno; /* execve() failed with this; 0 if it ran */
};

/* Appends what the pipe holds; false at EOF, on overflow or on an error. */
static bool read_output(int fd, struct child_result *res)
{
	char buf[1024];
	ssize_t got = read(fd, buf, sizeof(buf));

	if (got < 0)
		return errno == EINTR || errno == EAGAIN;
	if (got == 0)
		return false;
	size_t room = MAX_OUTPUT - res->len;
	if ((size_t)got > room) {
		res->overflow = true;
		got = (ssize_t)room;
	}
	memcpy(res->out + res->len, buf, (size_t)got);
	res->len += (size_t)got;
	return !res->overflow;
}

static int spawn_version(const char *path, int out_fd, pid_t *pid)
{
	char *const argv[] = { (char *)path, (char *)"-version", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t dfl;
	int r;

	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	if ((r = posix_spawn_file_actions_init(&fa)) != 0)
		return -r;
	if ((r = posix_spawnattr_init(&attr)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -r;
	}
	/* Its own process group (0: the child's pid), so a timeout kills all it started. */
	if ((r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0)) == 0 &&
	    (r = posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO)) == 0 &&
	    (r = posix_spawnattr_setpgroup(&attr, 0)) == 0 && (r = posix_spawnattr_setsigdefault(&attr, &dfl)) == 0 &&
	    (r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF)) == 0)
		r = posix_spawn(pid, path, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return -r;
}

/* Runs `path -version` in its own process group with stdin from /dev/null,
 * collecting at most MAX_OUTPUT bytes of stdout, until both its stdout closes
 * and it exits, or the deadline. One poll(2) watches the pipe and a pidfd.
 * On timeout the whole group is killed, so a child that forks cannot keep us
 * waiting either. -errno if it could not be run; an exec failure (missing
 * interpreter, bad format) is res->exec_errno. */
static int run_version(const char *path, int timeout_ms, struct child_result *res)
{
	long long deadline = now_ms() + timeout_ms;
	_cleanup_close_ int rd = -1, pidfd = -1;
	int pipefd[2], r;
	bool open_out = true, running = true;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	rd = pipefd[0];
	r = spawn_version(path, pipefd[1], &pid);
	close(pipefd[1]);
	if (r < 0) {
		res->exec_errno = -r;
		return 0;
	}
	pidfd = pidfd_open(pid, 0);
	if (pidfd < 0) {
		r = -errno;
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return r;
	}
	while ((open_out || running) && !res->overflow) {
		struct pollfd p[2] = { { .fd = open_out ? rd : -1, .events = POLLIN }, { .fd = running ? pidfd : -1, .events = POLLIN } };
		long long left = deadline - now_ms();

		if (left <= 0) {
			res->timed_out = true;
			break;
		}
		if (poll(p, 2, (int)left) < 0 && errno != EINTR)
			break;
		if (p[0].revents && !read_output(rd, res))
			open_out = false;
		if (p[1].revents)
			running = false;
	}
	if (res->timed_out || res->overflow || running)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &res->status, 0) < 0 && errno == EINTR)
		;
	/* Whatever it left running in its group goes too. */
	kill(-pid, SIGKILL);
	res->out[res->len] = '\0';
	return 0;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The record, atomically: complete at its path or not there. */
static int write_record(const char *output, const char *expect)
{
	struct atomic_file af;
	char line[VERSION_MAX_LEN + 2];
	int n = snprintf(line, sizeof(line), "%s\n", expect), r;

	r = atomic_file_open(&af, output, 0644);
	if (r < 0) {
		log_error("%s: cannot create a temporary file beside it: %s", output, strerror(-r));
		return EXIT_BAD;
	}
	r = write_all(af.fd, line, (size_t)n);
	if (r == 0)
		r = atomic_file_commit(&af);
	if (r < 0 && af.in_place) {
		log_warning("%s: written (%s), but syncing its directory failed: %s; it may not survive a crash",
			    output, expect, strerror(-r));
		r = 0;
	}
	atomic_file_abort(&af);
	if (r < 0) {
		log_error("%s: cannot write it: %s", output, strerror(-r));
		return EXIT_BAD;
	}
	log_info("%s: %s", output, expect);
	return 0;
}

static int record_version(const char *envd, const char *expect, const char *output, int timeout_ms)
{
	struct child_result res;
	struct stat st;
	char shown[200];
	int r;

	if (stat(envd, &st) < 0) {
		log_error("%s: %s", envd, errno == ENOENT ? "no such file (is envd in the image?)" : strerror(errno));
		return EXIT_BAD;
	}
	if (!S_ISREG(st.st_mode)) {
		log_error("%s: not a regular file", envd);
		return EXIT_BAD;
	}
	if (access(envd, X_OK) < 0) {
		log_error("%s: not executable (mode %04o)", envd, (unsigned)(st.st_mode & 07777));
		return EXIT_BAD;
	}

	r = run_version(envd, timeout_ms, &res);
	if (r < 0) {
		log_error("%s: cannot run it: %s", envd,
			  r == -ENOSYS ? "pidfd_open(2) is missing: this kernel is older than Linux 5.3" : strerror(-r));
		return EXIT_BAD;
	}
	if (res.exec_errno) {
		log_error("%s: cannot execute it: %s", envd, strerror(res.exec_errno));
		return EXIT_BAD;
	}
	if (res.timed_out) {
		log_error("%s -version: no answer within %d ms; killed", envd, timeout_ms);
		return EXIT_BAD;
	}
	if (res.overflow) {
		log_error("%s -version: printed more than %d bytes; not a version", envd, MAX_OUTPUT);
		return EXIT_BAD;
	}
	if (WIFSIGNALED(res.status)) {
		log_error("%s -version: killed by signal %d (%s)", envd, WTERMSIG(res.status), strsignal(WTERMSIG(res.status)));
		return EXIT_BAD;
	}
	if (!WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0) {
		log_error("%s -version: exited with status %d", envd, WEXITSTATUS(res.status));
		return EXIT_BAD;
	}

	const char *s = res.out, *e = res.out + res.len;
	while (s < e && is_space(*s))
		s++;
	while (e > s && is_space(e[-1]))
		e--;
	if (s == e) {
		log_error("%s -version: printed nothing", envd);
		return EXIT_BAD;
	}
	quote(s, (size_t)(e - s), shown, sizeof(shown));
	if (memchr(s, '\n', (size_t)(e - s))) {
		log_error("%s -version: printed more than one line: %s", envd, shown);
		return EXIT_BAD;
	}
	if (version_parse(s, (size_t)(e - s), NULL) < 0) {
		log_error("%s -version: printed %s, which is not MAJOR.MINOR.PATCH (the form both SDK parsers accept)",
			  envd, shown);
		return EXIT_BAD;
	}
	if ((size_t)(e - s) != strlen(expect) || memcmp(s, expect, strlen(expect)) != 0) {
		log_error("%s -version: reports %s but the lock pins %s", envd, shown, expect);
		return EXIT_BAD;
	}

	return write_record(output, expect);
}

/* A record is exactly one version and one newline: what we write. */
static int check_record(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	char buf[64], shown[200];
	size_t len = 0;
	struct stat st;

	if (fd < 0) {
		log_error("%s: %s", path, strerror(errno));
		return EXIT_BAD;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_error("%s: not a regular file", path);
		return EXIT_BAD;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("%s: %s", path, strerror(errno));
			return EXIT_BAD;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf) - 1) {
			log_error("%s: too long for a version record", path);
			return EXIT_BAD;
		}
	}
	buf[len] = '\0';
	quote(buf, len, shown, sizeof(shown));
	if (len < 2 || buf[len - 1] != '\n') {
		log_error("%s: %s is not a version followed by one newline", path, shown);
		return EXIT_BAD;
	}
	if (version_parse(buf, len - 1, NULL) < 0) {
		log_error("%s: %s is not MAJOR.MINOR.PATCH and a newline", path, shown);
		return EXIT_BAD;
	}
	fputs(buf, stdout);
	return fflush(stdout) == 0 ? 0 : EXIT_BAD;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "envd", required_argument, NULL, 'e' },
		{ "expect", required_argument, NULL, 'x' },
		{ "output", required_argument, NULL, 'o' },
		{ "timeout", required_argument, NULL, 't' },
		{ "check", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *envd = NULL, *expect = NULL, *output = NULL, *check = NULL;
	int timeout_ms = DEFAULT_TIMEOUT_MS, c;

	log_init(argv[0]);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': envd = optarg; break;
		case 'x': expect = optarg; break;
		case 'o': output = optarg; break;
		case 'c': check = optarg; break;
		case 't': {
			char *end;
			errno = 0;
			double t = strtod(optarg, &end);
			if (errno || *end || !(t > 0 && t <= 3600)) {
				log_error("--timeout must be a number of seconds, up to 3600");
				return EXIT_USAGE;
			}
			timeout_ms = (int)(t * 1000 + 0.5);
			if (timeout_ms < 1)
				timeout_ms = 1;
			break;
		}
		case 'h': usage(stdout); return 0;
		default:
			log_error("unknown or incomplete option %s; see --help", argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument \"%s\"; see --help", argv[optind]);
		return EXIT_USAGE;
	}
	if (check) {
		if (envd || expect || output) {
			log_error("--check takes no other option");
			return EXIT_USAGE;
		}
		return check_record(check);
	}
	if (!envd || !expect || !output) {
		log_error("need --envd, --expect and --output (or --check FILE); see --help");
		return EXIT_USAGE;
	}
	if (version_parse(expect, strlen(expect), NULL) < 0) {
		log_error("--expect \"%s\" is not MAJOR.MINOR.PATCH", expect);
		return EXIT_USAGE;
	}
	return record_version(envd, expect, output, timeout_ms);
}
