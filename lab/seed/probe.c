/*
 * probe: how long a module load keeps a 1-CPU machine from running anything else.
 *
 * Usage: probe MODULE.ko|- SETTLE_MS
 *
 * A child process wakes every millisecond (clock_nanosleep on absolute deadlines,
 * CLOCK_MONOTONIC) and records how late each wake-up came. The parent waits SETTLE_MS, loads
 * MODULE with exactly one finit_module(2) call (or loads nothing for "-": the idle
 * baseline), times the call, waits SETTLE_MS again, then stops the child. On a kernel whose
 * symbol lookups never reschedule, the child cannot run while the module resolves its
 * symbols, so its longest lateness is the time the CPU was held.
 *
 * Output, one line:
 *   SEED module=<name> rc=<n> errno=<n> load_us=<n> samples=<n> p50_us=<n> p99_us=<n> max_us=<n>
 * Built static (gcc -static -O2) for the busybox initramfs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES (1 << 20)

static volatile sig_atomic_t stop;
static void on_stop(int sig) { (void)sig; stop = 1; }

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

/* The waking child: writes its statistics to fd out. */
static void waker(int out)
{
	static long long late[MAX_SAMPLES];
	long n = 0;
	struct timespec next;
	signal(SIGUSR1, on_stop);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!stop && n < MAX_SAMPLES) {
		next.tv_nsec += 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR && stop)
			break;
		long long want = next.tv_sec * 1000000000LL + next.tv_nsec;
		long long l = now_ns() - want;
		late[n++] = l > 0 ? l : 0;
		/* A long stall: start again from now rather than replay the missed ticks. */
		if (l > 1000000)
			clock_gettime(CLOCK_MONOTONIC, &next);
	}
	qsort(late, n, sizeof(late[0]), cmp);
	dprintf(out, "samples=%ld p50_us=%lld p99_us=%lld max_us=%lld\n", n,
		n ? late[n / 2] / 1000 : 0, n ? late[(n * 99) / 100] / 1000 : 0,
		n ? late[n - 1] / 1000 : 0);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s MODULE.ko|- SETTLE_MS\n", argv[0]);
		return 2;
	}
	const char *path = argv[1];
	long settle = atol(argv[2]);
	int p[2];
	if (pipe(p))
		return 2;
	pid_t child = fork();
	if (child == 0) {
		close(p[0]);
		waker(p[1]);
	}
	close(p[1]);
	usleep(settle * 1000);
	long rc = 0;
	int e = 0;
	long long t0 = now_ns(), t1 = t0;
	if (strcmp(path, "-") != 0) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror(path);
			return 2;
		}
		t0 = now_ns();
		rc = syscall(SYS_finit_module, fd, "", 0);
		t1 = now_ns();
		e = rc < 0 ? errno : 0;
		close(fd);
	}
	usleep(settle * 1000);
	kill(child, SIGUSR1);
	char buf[256] = { 0 };
	ssize_t got = read(p[0], buf, sizeof(buf) - 1);
	waitpid(child, NULL, 0);
	if (got > 0 && buf[got - 1] == '\n')
		buf[got - 1] = 0;
	const char *base = strrchr(path, '/');
	printf("SEED module=%s rc=%ld errno=%d load_us=%lld %s\n", base ? base + 1 : path, rc, e,
	       (t1 - t0) / 1000, buf);
	return 0;
}
