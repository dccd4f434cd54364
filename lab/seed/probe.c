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
 * Meanwhile a loopback TCP flow runs (one process sends 1 KiB every millisecond to another,
 * which reads it): the kernel's TCP retransmissions during the run (RetransSegs of
 * /proc/net/snmp, after minus before) show what a starved CPU does to network traffic. The
 * loopback interface must be up (`ifconfig lo 127.0.0.1 up`).
 *
 * Output, one line:
 *   SEED module=<name> rc=<n> errno=<n> load_us=<n> samples=<n> p50_us=<n> p99_us=<n> max_us=<n>
 *        retrans=<n>   (-1 when the flow could not be set up)
 * Built static (gcc -static -O2) for the busybox initramfs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

/* RetransSegs from /proc/net/snmp (the Tcp: header line names the columns), or -1. */
static long retrans_segs(void)
{
	FILE *f = fopen("/proc/net/snmp", "r");
	char head[1024], vals[1024];
	long out = -1;
	if (!f)
		return -1;
	while (fgets(head, sizeof(head), f)) {
		if (strncmp(head, "Tcp:", 4) || !fgets(vals, sizeof(vals), f))
			continue;
		char *hs, *vs, *h = strtok_r(head, " \n", &hs), *v = strtok_r(vals, " \n", &vs);
		while (h && v) {
			if (!strcmp(h, "RetransSegs")) {
				out = atol(v);
				break;
			}
			h = strtok_r(NULL, " \n", &hs);
			v = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
	return out;
}

/* The loopback flow: a reader and a writer process; returns 0 when both run. */
static int start_flow(pid_t *reader, pid_t *writer)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(5001) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (l < 0)
		return -1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1)) {
		close(l);
		return -1;
	}
	*reader = fork();
	if (*reader == 0) {
		char buf[4096];
		int c = accept(l, NULL, NULL);
		while (c >= 0 && read(c, buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	close(l);
	*writer = fork();
	if (*writer == 0) {
		char buf[1024] = { 0 };
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
			_exit(1);
		for (;;) {
			if (write(s, buf, sizeof(buf)) < 0)
				_exit(1);
			usleep(1000);
		}
	}
	return 0;
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
	pid_t reader = -1, writer = -1;
	int flow = start_flow(&reader, &writer);
	usleep(settle * 1000);
	long retrans0 = retrans_segs();
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
	long retrans1 = retrans_segs();
	if (flow == 0) {
		kill(writer, SIGKILL);
		kill(reader, SIGKILL);
		waitpid(writer, NULL, 0);
		waitpid(reader, NULL, 0);
	}
	long retrans = flow == 0 && retrans0 >= 0 && retrans1 >= 0 ? retrans1 - retrans0 : -1;
	kill(child, SIGUSR1);
	char buf[256] = { 0 };
	ssize_t got = read(p[0], buf, sizeof(buf) - 1);
	waitpid(child, NULL, 0);
	if (got > 0 && buf[got - 1] == '\n')
		buf[got - 1] = 0;
	const char *base = strrchr(path, '/');
	printf("SEED module=%s rc=%ld errno=%d load_us=%lld %s retrans=%ld\n", base ? base + 1 : path,
	       rc, e, (t1 - t0) / 1000, buf, retrans);
	return 0;
}
