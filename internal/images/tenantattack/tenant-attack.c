/*
 * tenant-attack: what a hostile tenant does to the files of its own slice
 * from inside its container, for the red-team suite (acctest/redteam). The
 * slice-check image carries it beside slice-check, and the image has no
 * coreutils: each step an attack needs is one verb here.
 *
 *   tenant-attack poke FILE OFFSET VALUE   write VALUE as 8 little-endian bytes at OFFSET
 *   tenant-attack peek FILE OFFSET         print the 8 bytes at OFFSET
 *   tenant-attack write FILE               truncate FILE and write into it
 *   tenant-attack chmod FILE MODE          chmod FILE (octal MODE)
 *   tenant-attack unlink FILE
 *   tenant-attack rename FILE NEWPATH
 *   tenant-attack link FILE NEWPATH        hard-link FILE
 *   tenant-attack mkdir DIR
 *   tenant-attack copy SRC DST             copy a file (a driver library to another path)
 *   tenant-attack exec-clean CMD [ARG...]  exec CMD with an empty environment (env -i)
 *   tenant-attack wait-file FILE SECONDS   wait until FILE exists (a step of another process)
 *
 * Every verb prints one line starting "tenant-attack: VERB ...: " and then
 * "done" or "refused: <errno text>", and exits 0 either way (the suite reads
 * the line; a refusal is what it hopes for). A usage error exits 64.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int report(const char *verb, const char *what, int rc)
{
	if (rc == 0)
		printf("tenant-attack: %s %s: done\n", verb, what);
	else
		printf("tenant-attack: %s %s: refused: %s\n", verb, what, strerror(errno));
	return 0;
}

static int poke(const char *path, const char *off, const char *val)
{
	uint64_t v = strtoull(val, NULL, 0);
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	int fd = open(path, O_RDWR | O_CLOEXEC);
	int rc = fd < 0 ? -1 : (pwrite(fd, b, 8, (off_t)strtoll(off, NULL, 0)) == 8 ? 0 : -1);
	if (fd >= 0)
		close(fd);
	char what[4200];
	snprintf(what, sizeof what, "%s@%s=%s", path, off, val);
	return report("poke", what, rc);
}

static int peek(const char *path, const char *off)
{
	unsigned char b[8] = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pread(fd, b, 8, (off_t)strtoll(off, NULL, 0)) != 8) {
		printf("tenant-attack: peek %s@%s: refused: %s\n", path, off, strerror(errno));
		return 0;
	}
	close(fd);
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	printf("tenant-attack: peek %s@%s: %" PRIu64 "\n", path, off, v);
	return 0;
}

static int write_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	int rc = fd < 0 ? -1 : (write(fd, "gpuslice", 8) == 8 ? 0 : -1);
	if (fd >= 0)
		close(fd);
	return report("write", path, rc);
}

static int copy(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	int rc = in < 0 || out < 0 ? -1 : 0;
	char buf[1 << 16];
	ssize_t n;
	while (rc == 0 && (n = read(in, buf, sizeof buf)) != 0)
		if (n < 0 || write(out, buf, (size_t)n) != n)
			rc = -1;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out))
		rc = -1;
	char what[8400];
	snprintf(what, sizeof what, "%s to %s", src, dst);
	return report("copy", what, rc);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3)
		goto usage;
	const char *verb = argv[1], *a = argv[2], *b = argc > 3 ? argv[3] : NULL;
	if (!strcmp(verb, "poke") && argc == 5)
		return poke(a, b, argv[4]);
	if (!strcmp(verb, "peek") && argc == 4)
		return peek(a, b);
	if (!strcmp(verb, "write") && argc == 3)
		return write_file(a);
	if (!strcmp(verb, "chmod") && argc == 4)
		return report("chmod", a, chmod(a, (mode_t)strtoul(b, NULL, 8)));
	if (!strcmp(verb, "unlink") && argc == 3)
		return report("unlink", a, unlink(a));
	if (!strcmp(verb, "rename") && argc == 4)
		return report("rename", a, rename(a, b));
	if (!strcmp(verb, "link") && argc == 4)
		return report("link", a, link(a, b));
	if (!strcmp(verb, "mkdir") && argc == 3)
		return report("mkdir", a, mkdir(a, 0755));
	if (!strcmp(verb, "copy") && argc == 4)
		return copy(a, b);
	if (!strcmp(verb, "wait-file") && argc == 4) {
		/* polls: the other process is in this container, with no way to
		 * notify a shell script */
		struct timespec tick = {.tv_nsec = 50 * 1000 * 1000};
		for (long i = 0, n = strtol(b, NULL, 10) * 20; i < n; i++) {
			if (access(a, F_OK) == 0)
				return report("wait-file", a, 0);
			nanosleep(&tick, NULL);
		}
		errno = ETIMEDOUT;
		return report("wait-file", a, -1);
	}
	if (!strcmp(verb, "exec-clean")) {
		char *empty[] = {NULL};
		execve(a, argv + 2, empty);
		printf("tenant-attack: exec-clean %s: refused: %s\n", a, strerror(errno));
		return 0;
	}
usage:
	fprintf(stderr, "usage: tenant-attack poke|peek|write|chmod|unlink|rename|link|mkdir|copy|exec-clean|wait-file ... (see the source)\n");
	return 64;
}
