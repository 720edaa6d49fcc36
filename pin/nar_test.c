/* Unit tests for nar.c: digests of small trees against values printed by
 * Nix's own nix-hash 2.8 for the same trees (the pytest suite compares many
 * more trees with nix-hash live), the encodings, and the SRI parser. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock.h"
#include "nar.h"
#include "tap.h"

static void write_file(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data) || fchmod(fd, mode) < 0)
		perror(path), exit(2);
	close(fd);
}

static char *path_in(const char *dir, const char *rel)
{
	static char buf[4096];
	snprintf(buf, sizeof(buf), "%s/%s", dir, rel);
	return buf;
}

int main(void)
{
	char tmpl[] = "/tmp/nar-test-XXXXXX", hex[NAR_HEX_SIZE], sri[NAR_SRI_SIZE], n32[NAR_NIX32_SIZE];
	unsigned char d[NAR_DIGEST_SIZE], back[NAR_DIGEST_SIZE];
	struct nar_error err;
	char *dir = mkdtemp(tmpl);

	if (!dir)
		return perror("mkdtemp"), 2;

	/* An empty regular file: nix-hash --type sha256 FILE */
	write_file(path_in(dir, "e"), "", 0644);
	ok(nar_hash_path(path_in(dir, "e"), d, &err) == 0, "hash an empty file");
	nar_hex(d, hex);
	ok(!strcmp(hex, "77ac62e2629d8e45f624589c0c8bf99e24b3a722349bf1e79bc186008534e246"), "empty file: hex %s", hex);
	nar_nix32(d, n32);
	ok(!strcmp(n32, "0ip26j2h11n1kgkz36rl4akv694yz65hr72q4kv4b3lxcbi65b3p"), "empty file: nix32 %s", n32);

	/* t/{a, empty/, sub/x (0755), sub/l -> ../a} */
	mkdir(path_in(dir, "t"), 0755);
	mkdir(path_in(dir, "t/sub"), 0755);
	mkdir(path_in(dir, "t/empty"), 0755);
	write_file(path_in(dir, "t/a"), "hello\n", 0644);
	write_file(path_in(dir, "t/sub/x"), "#!/bin/sh\n", 0755);
	if (symlink("../a", path_in(dir, "t/sub/l")) < 0)
		return perror("symlink"), 2;
	ok(nar_hash_path(path_in(dir, "t"), d, &err) == 0, "hash a small tree");
	nar_hex(d, hex);
	nar_sri(d, sri);
	nar_nix32(d, n32);
	ok(!strcmp(hex, "fbf592c988502da4c408fb5bfa971d3eae446ffdb3900f7aa2fb812333bc3e01"), "tree: hex %s", hex);
	ok(!strcmp(sri, "sha256-+/WSyYhQLaTECPtb+pcdPq5Eb/2zkA96ovuBIzO8PgE="), "tree: sri %s", sri);
	ok(!strcmp(n32, "009yphrj70gvl9x0z45kzmpl9biy3nbzlnzv132a8bahi34r5xgv"), "tree: nix32 %s", n32);
	int fd = open(path_in(dir, "t"), O_RDONLY | O_DIRECTORY);
	ok(nar_hash_dirfd(fd, back, &err) == 0 && !memcmp(d, back, sizeof(d)), "dirfd and path agree");
	close(fd);

	/* The exec bit counts; group/other bits do not. */
	chmod(path_in(dir, "t/sub/x"), 0744);
	ok(nar_hash_path(path_in(dir, "t"), back, &err) == 0 && !memcmp(d, back, sizeof(d)), "only the owner's x bit counts");
	chmod(path_in(dir, "t/sub/x"), 0644);
	ok(nar_hash_path(path_in(dir, "t"), back, &err) == 0 && memcmp(d, back, sizeof(d)) != 0, "dropping x changes the hash");

	/* A FIFO is not representable, and is named. */
	mkfifo(path_in(dir, "t/sub/fifo"), 0644);
	ok(nar_hash_path(path_in(dir, "t"), back, &err) == -EINVAL && !strcmp(err.path, "sub/fifo"), "a FIFO is refused and named (%s)", err.path);

	/* SRI round trip and strictness. */
	ok(lock_parse_tree_sha256(sri, strlen(sri), back) == 0 && !memcmp(back, d, sizeof(d)), "SRI parses back");
	ok(lock_parse_tree_sha256("sha256-+/WSyYhQLaTECPtb+pcdPq5Eb/2zkA96ovuBIzO8PgF=", 51, back) == -EINVAL, "non-canonical last digit refused");
	ok(lock_parse_tree_sha256("sha512-+/WSyYhQLaTECPtb+pcdPq5Eb/2zkA96ovuBIzO8PgE=", 51, back) == -EINVAL, "another algorithm refused");
	ok(lock_parse_tree_sha256("sha256-+/WSyYhQLaTECPtb+pcdPq5Eb/2zkA96ovuBIzO8PgE", 50, back) == -EINVAL, "missing padding refused");
	ok(lock_parse_tree_sha256("sha256-+/WSyYhQLaTECPtb+pcdPq5Eb/2zkA96ovuBIzO8Pg==", 51, back) == -EINVAL, "double padding refused");
	ok(lock_parse_tree_sha256("sha256-+/WSyYhQLaTECPtb+pcdPq5Eb-2zkA96ovuBIzO8PgE=", 51, back) == -EINVAL, "url-safe alphabet refused");

	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 2;
	return tap_done();
}
