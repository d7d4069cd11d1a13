/*
 * slice-attack: what a hostile tenant tries inside a claim's container, for
 * the tests that prove each attempt is refused or contained. Statically
 * linked, so /etc/ld.so.preload (the gpuslice library) never loads into it,
 * and with the simulated driver's memory functions linked in: its
 * allocations go straight to the simulated GPU (FAKEGPU_STATE, the
 * simulated silicon), as a program calling a real driver directly would.
 *
 *   slice-attack poke FILE OFFSET VALUE   write a 64-bit little-endian VALUE at OFFSET
 *   slice-attack tamper FILE              try to write, truncate, chmod, chown,
 *                                         unlink, rename, replace and hard-link FILE;
 *                                         exit 0 only if every attempt is refused
 *   slice-attack alloc MIB [--hold]       allocate MIB of device memory around the
 *                                         library, in 256 MiB blocks; --hold keeps it
 *                                         until killed
 *   slice-attack rename FROM TO           rename(2), e.g. a directory above a mount
 *   slice-attack unlink FILE              unlink(2)
 *   slice-attack symlink TARGET LINK      symlink(2): a path the node plugin resolves on the host
 *   slice-attack mkfifo PATH              mkfifo(3): a file whose open blocks a reader
 *   slice-attack forge DIR BYTES          create DIR and a limits file in it granting
 *                                         BYTES (the layout of gpuslice.h)
 *   slice-attack copy SRC DST             copy a file (the driver library to a path of its own)
 *   slice-attack wait-file FILE SECONDS   wait until FILE exists (another process's step;
 *                                         the image has no sleep)
 *   slice-attack exec-clean CMD [ARG...]  exec CMD with an empty environment (env -i)
 *
 * Every line starts with "slice-attack:"; tests read them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../../nodeplugin/shim/fake/fakegpu.h"
#include "../../../nodeplugin/shim/include/gpuslice.h"

#define MiB (1024ull * 1024ull)

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int poke(const char *path, const char *off, const char *val)
{
	uint64_t v = strtoull(val, NULL, 0);
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	int fd = open(path, O_WRONLY);
	if (fd < 0 || pwrite(fd, b, 8, (off_t)strtoll(off, NULL, 0)) != 8) {
		printf("slice-attack: poke %s at %s: refused (%s)\n", path, off, strerror(errno));
		return 1;
	}
	close(fd);
	printf("slice-attack: poke %s at %s = %llu: written\n", path, off, (unsigned long long)v);
	return 0;
}

static int attempts;

static int report(const char *what, int r)
{
	attempts++;
	if (r == 0)
		printf("slice-attack: %s: DONE\n", what);
	else
		printf("slice-attack: %s: refused (%s)\n", what, strerror(errno));
	return r == 0;
}

static int tamper(const char *path)
{
	char other[4200], moved[4200];
	snprintf(other, sizeof other, "%s.attack", path);
	snprintf(moved, sizeof moved, "%s.moved", path);
	int done = 0, fd;
	char status[4096] = "", *cap = NULL;
	if ((fd = open("/proc/self/status", O_RDONLY)) >= 0) {
		ssize_t n = read(fd, status, sizeof status - 1);
		status[n > 0 ? n : 0] = 0;
		close(fd);
		if ((cap = strstr(status, "CapEff:")))
			cap[strcspn(cap, "\n")] = 0;
	}
	printf("slice-attack: as uid %d, %s\n", (int)geteuid(), cap ? cap : "CapEff: unknown");
	fd = open(path, O_WRONLY);
	done += report("open for writing", fd < 0 ? -1 : 0);
	if (fd >= 0) {
		done += report("write", pwrite(fd, "x", 1, 16) == 1 ? 0 : -1);
		close(fd);
	}
	done += report("truncate", truncate(path, 0));
	done += report("chmod 0666", chmod(path, 0666));
	done += report("chown 65534", chown(path, 65534, 65534));
	done += report("unlink", unlink(path));
	done += report("rename away", rename(path, moved));
	fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		close(fd);
		done += report("replace (rename a file over it)", rename(other, path));
		unlink(other);
	} else {
		printf("slice-attack: replace: cannot create %s (%s)\n", other, strerror(errno));
	}
	done += report("hard link", link(path, other));
	unlink(other);
	printf("slice-attack: %d of %d attempts on %s succeeded\n", done, attempts, path);
	return done ? 1 : 0;
}

static int alloc(uint64_t mib, int hold)
{
	uint64_t got = 0;
	while (got < mib) {
		uint64_t n = mib - got < 256 ? mib - got : 256;
		if (fake_mem_reserve(n * MiB)) {
			printf("slice-attack: the GPU refused %llu MiB after %llu MiB\n", (unsigned long long)n,
			       (unsigned long long)got);
			break;
		}
		got += n;
	}
	printf("slice-attack: allocated %llu MiB around the library at unix_ns=%llu pid=%d\n", (unsigned long long)got,
	       (unsigned long long)unix_ns(), (int)getpid());
	fflush(stdout);
	while (hold)
		pause();
	return got == mib ? 0 : 1;
}

static int forge(const char *dir, const char *bytes)
{
	char path[4200];
	for (char *p = strchr(dir + 1, '/');; p = strchr(p + 1, '/')) {
		snprintf(path, sizeof path, "%.*s", p ? (int)(p - dir) : (int)strlen(dir), dir);
		mkdir(path, 0755);
		if (!p)
			break;
	}
	struct gpuslice_limits l = {.magic = GPUSLICE_LIMITS_MAGIC, .version = GPUSLICE_LIMITS_VERSION,
				    .size = GPUSLICE_LIMITS_SIZE, .memory_limit = strtoull(bytes, NULL, 0),
				    .compute_share = 100, .compute_window_ms = GPUSLICE_DEFAULT_COMPUTE_WINDOW_MS,
				    .context_overhead = GPUSLICE_DEFAULT_CONTEXT_OVERHEAD};
	snprintf(path, sizeof path, "%s/%s", dir, GPUSLICE_LIMITS_FILE);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, &l, sizeof l) != (ssize_t)sizeof l) {
		printf("slice-attack: forge %s: refused (%s)\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	printf("slice-attack: forged %s granting %llu bytes\n", path, (unsigned long long)l.memory_limit);
	return 0;
}

static int copy(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	int r = in < 0 || out < 0 ? -1 : 0;
	char buf[1 << 16];
	ssize_t n;
	while (r == 0 && (n = read(in, buf, sizeof buf)) != 0)
		if (n < 0 || write(out, buf, (size_t)n) != n)
			r = -1;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out))
		r = -1;
	return report("copy", r) ? 0 : 1;
}

/* Polls: the other process is in this container, with no way to notify a
 * shell script. */
static int wait_file(const char *path, const char *seconds)
{
	struct timespec tick = {.tv_nsec = 50 * 1000 * 1000};
	for (long i = 0, n = strtol(seconds, NULL, 10) * 20; i < n; i++) {
		if (access(path, F_OK) == 0)
			return report("wait-file", 0) ? 0 : 1;
		nanosleep(&tick, NULL);
	}
	errno = ETIMEDOUT;
	return report("wait-file", -1) ? 0 : 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "poke"))
		return poke(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "tamper"))
		return tamper(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "rename"))
		return report("rename", rename(argv[2], argv[3])) ? 0 : 1;
	if (argc == 4 && !strcmp(argv[1], "symlink"))
		return report("symlink", symlink(argv[2], argv[3])) ? 0 : 1;
	if (argc == 3 && !strcmp(argv[1], "mkfifo"))
		return report("mkfifo", mkfifo(argv[2], 0666)) ? 0 : 1;
	if (argc == 3 && !strcmp(argv[1], "unlink"))
		return report("unlink", unlink(argv[2])) ? 0 : 1;
	if (argc == 4 && !strcmp(argv[1], "forge"))
		return forge(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "copy"))
		return copy(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "wait-file"))
		return wait_file(argv[2], argv[3]);
	if (argc >= 3 && !strcmp(argv[1], "exec-clean")) {
		char *empty[] = {NULL};
		execve(argv[2], argv + 2, empty);
		return report("exec-clean", -1) ? 0 : 1;
	}
	if ((argc == 3 || (argc == 4 && !strcmp(argv[3], "--hold"))) && !strcmp(argv[1], "alloc"))
		return alloc(strtoull(argv[2], NULL, 10), argc == 4);
	fprintf(stderr, "usage: slice-attack poke FILE OFFSET VALUE | tamper FILE | alloc MIB [--hold] | rename FROM TO | unlink FILE | symlink TARGET LINK | mkfifo PATH | forge DIR BYTES | copy SRC DST | wait-file FILE SECONDS | exec-clean CMD [ARG...]\n");
	return 2;
}
