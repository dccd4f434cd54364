/*
 * finit: load one kernel module with exactly ONE finit_module(2) call.
 *
 * Why not busybox insmod: when a load fails it retries through the other syscall
 * (init_module), so every kernel error is logged twice and the oracle logs stop being
 * comparable line by line. This helper makes one call and reports it on one line:
 *
 *   FINIT <path> rc=<n> errno=<NAME>
 *
 * rc is the syscall's return value (0 or -1); errno is the symbolic name (EINVAL, ENOEXEC,
 * EEXIST, ...) or 0 on success. Exit status: 0 when the module loaded, 1 when the kernel
 * refused it, 2 for usage errors or when the file cannot be opened (the line is still
 * printed, with rc=-1 and the open(2) errno, and the word "open" after it).
 *
 * Usage: finit <module.ko> [params] [flags]
 *   params  module parameters, as for insmod ("" when absent)
 *   flags   MODULE_INIT_* flags as a number (0 when absent; e.g. 3 to ignore vermagic and
 *           modversions)
 *
 * A module file compressed as distributions ship them (.ko.xz, .ko.zst, .ko.gz) is handed to
 * the kernel unchanged with MODULE_INIT_COMPRESSED_FILE added to the flags: the kernel
 * decompresses it (CONFIG_MODULE_DECOMPRESS, 6.x), still in the one call.
 *
 * Built static (gcc -static -O2) so that it runs in a busybox-only initramfs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *errno_name(int e)
{
	if (e == 0)
		return "0";
	/* glibc >= 2.32; NULL for numbers it does not know. */
	const char *name = strerrorname_np(e);
	return name ? name : "UNKNOWN";
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: %s <module.ko> [params] [flags]\n", argv[0]);
		return 2;
	}
	const char *path = argv[1];
	const char *params = argc > 2 ? argv[2] : "";
	unsigned long flags = 0;
	if (argc > 3) {
		char *end;
		errno = 0;
		flags = strtoul(argv[3], &end, 0);
		if (errno || *end || end == argv[3]) {
			fprintf(stderr, "finit: bad flags '%s'\n", argv[3]);
			return 2;
		}
	}

	size_t len = strlen(path);
	static const char *const compressed[] = { ".xz", ".zst", ".gz" };
	for (size_t i = 0; i < sizeof(compressed) / sizeof(compressed[0]); i++) {
		size_t n = strlen(compressed[i]);
		if (len > n && strcmp(path + len - n, compressed[i]) == 0)
			flags |= 4; /* MODULE_INIT_COMPRESSED_FILE */
	}

	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		printf("FINIT %s rc=-1 errno=%s open\n", path, errno_name(e));
		fflush(stdout);
		return 2;
	}
	long rc = syscall(SYS_finit_module, fd, params, flags);
	int e = rc < 0 ? errno : 0;
	close(fd);
	printf("FINIT %s rc=%ld errno=%s\n", path, rc, errno_name(e));
	fflush(stdout);
	return rc == 0 ? 0 : 1;
}
