/*
 * shmout: copy one file into the shared-memory BAR of QEMU's ivshmem-plain PCI device.
 *
 * Why: the serial console moves ~250 KB/s under TCG, so a few MB of /proc/kallsyms cost many
 * seconds (plus gzip time in the emulated CPU). The Debian kernel has no built-in virtio or
 * disk driver, but PCI is built in and root may mmap a BAR through sysfs; ivshmem-plain's
 * BAR 2 is backed by a host file (memory-backend-file,share=on), so a memcpy here lands in
 * that file at memory speed, with no module loaded in the guest.
 *
 * Layout written to the BAR (all little endian):
 *   offset 0:  8 bytes magic "KLPLAB01"
 *   offset 8:  u64 payload length
 *   offset 16: payload
 * The payload is written first and the header last, so a half-written BAR has no header.
 *
 * Usage: shmout <file>; prints "SHMOUT bytes=<n> dev=<pci address>" and exits 0, or prints
 * the reason to stderr and exits 1 (the caller then falls back to the serial port).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PCI_DIR "/sys/bus/pci/devices"
#define HEADER_SIZE 16

static int read_hex_file(const char *dev, const char *name, unsigned long *out)
{
	char path[512];
	snprintf(path, sizeof path, PCI_DIR "/%s/%s", dev, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int ok = fscanf(f, "%lx", out) == 1;
	fclose(f);
	return ok ? 0 : -1;
}

/* Finds the first ivshmem device (vendor 0x1af4, device 0x1110); writes its name. */
static int find_ivshmem(char *name, size_t len)
{
	DIR *d = opendir(PCI_DIR);
	if (!d)
		return -1;
	struct dirent *e;
	int found = -1;
	while ((e = readdir(d))) {
		unsigned long vendor, device;
		if (e->d_name[0] == '.')
			continue;
		if (read_hex_file(e->d_name, "vendor", &vendor) ||
		    read_hex_file(e->d_name, "device", &device))
			continue;
		if (vendor == 0x1af4 && device == 0x1110) {
			snprintf(name, len, "%s", e->d_name);
			found = 0;
			break;
		}
	}
	closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s <file>\n", argv[0]);
		return 2;
	}
	char dev[256];
	if (find_ivshmem(dev, sizeof dev)) {
		fprintf(stderr, "shmout: no ivshmem PCI device (1af4:1110) found\n");
		return 1;
	}
	int in = open(argv[1], O_RDONLY);
	struct stat st;
	if (in < 0 || fstat(in, &st)) {
		fprintf(stderr, "shmout: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}

	char path[512];
	snprintf(path, sizeof path, PCI_DIR "/%s/resource2", dev);
	int fd = open(path, O_RDWR | O_SYNC);
	struct stat bst;
	if (fd < 0 || fstat(fd, &bst)) {
		fprintf(stderr, "shmout: %s: %s\n", path, strerror(errno));
		return 1;
	}
	size_t bar = (size_t)bst.st_size;
	if ((uint64_t)st.st_size > bar - HEADER_SIZE || bar < HEADER_SIZE) {
		fprintf(stderr, "shmout: %s is %lld bytes, the BAR holds %zu\n", argv[1],
			(long long)st.st_size, bar - HEADER_SIZE);
		return 1;
	}
	unsigned char *mem = mmap(NULL, bar, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "shmout: mmap %s: %s\n", path, strerror(errno));
		return 1;
	}

	uint64_t done = 0;
	while (done < (uint64_t)st.st_size) {
		ssize_t n = read(in, mem + HEADER_SIZE + done, (size_t)st.st_size - done);
		if (n <= 0) {
			fprintf(stderr, "shmout: read %s: %s\n", argv[1],
				n ? strerror(errno) : "unexpected end of file");
			return 1;
		}
		done += (uint64_t)n;
	}
	for (int i = 0; i < 8; i++)
		mem[8 + i] = (unsigned char)(done >> (8 * i));
	memcpy(mem, "KLPLAB01", 8);
	if (msync(mem, bar, MS_SYNC))
		fprintf(stderr, "shmout: msync: %s (ignored)\n", strerror(errno));
	munmap(mem, bar);
	close(fd);
	close(in);
	printf("SHMOUT bytes=%llu dev=%s\n", (unsigned long long)done, dev);
	return 0;
}
