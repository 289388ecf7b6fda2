/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "cli.h"
#include "stop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char *cli_cmd = "ctxdump";

void
cli_set_name(const char *name)
{
	cli_cmd = name;
}

const char *
cli_name(void)
{
	return cli_cmd;
}

static void
vwarn(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", cli_cmd);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void
cli_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
}

/* Descriptors above 2 open when ctxdump started (cli_count_inherited()). */
static unsigned inherited;

/* Where /proc/self/fd cannot be read, a probe of each possible descriptor
 * (some 0.1 us each) up to this many at most, as systemd's close_all_fds()
 * bounds its fallback (fd-util.c MAX_FD_LOOP_LIMIT). */
#define INHERITED_PROBE_MAX (1u << 20)

/* Into *n the descriptors in 3 .. limit - 1 that /proc/self/fd lists,
 * but the one that lists them; 0, or a negative errno. */
static int
count_listed(rlim_t limit, unsigned *n)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int err;

	*n = 0;
	if (!d)
		return -errno;
	for (errno = 0; (de = readdir(d)); errno = 0) {
		/* (a number's name: stop_task_tid() reads /proc's) */
		pid_t fd = stop_task_tid(de->d_name);

		if (fd > 2 && fd != dirfd(d) && (rlim_t)fd < limit)
			(*n)++;
	}
	err = errno;
	closedir(d);
	return -err;
}

void
cli_count_inherited(void)
{
	struct rlimit rl;
	unsigned n;
	rlim_t fd, end;

	/* Those at or above the limit are left out: a new descriptor is the
	 * lowest free one, below the limit, so they take none of it.  The
	 * listing costs one descriptor and no probe of each possible one
	 * (old: none counted above a limit of 256, and the budget and the
	 * hint under ulimit -n 1024 ignored 1020 open). */
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (count_listed(rl.rlim_cur, &n) == 0) {
		inherited = n;
		return;
	}
	/* No /proc (or none of ours), or no descriptor left to list it
	 * with (then every one below the limit is open, and the probe finds
	 * them all). */
	end = rl.rlim_cur < INHERITED_PROBE_MAX ? rl.rlim_cur : INHERITED_PROBE_MAX;
	inherited = 0;
	for (fd = 3; fd < end; fd++)
		if (fcntl((int)fd, F_GETFD) >= 0)
			inherited++;
}

unsigned
cli_inherited(void)
{
	return inherited;
}

void
cli_nofile_hint(int err, const char *what, unsigned need, const char *how)
{
	struct rlimit rl;
	char held[80] = "";

	if (err == -ENFILE) {
		cli_warn("the system has no file descriptor left (fs.file-max)");
		return;
	}
	if (err != -EMFILE || getrlimit(RLIMIT_NOFILE, &rl) != 0 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return;
	/* (old: "no more than 5 ... and a dump needs 5" with one of the 5
	 * taken by the caller's descriptor) */
	if (inherited)
		snprintf(held, sizeof(held),
			 ", %u of them open already when %s started", inherited,
			 cli_cmd);
	cli_warn("no more than %llu files may be open at once (ulimit -n)%s, "
		 "and %s needs %u%s",
		 (unsigned long long)rl.rlim_cur, held, what, need, how);
}

void
cli_usage_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try '%s --help' for more information.\n", cli_cmd);
	exit(CLI_EXIT_USAGE);
}

void
cli_version(void)
{
	printf("ctxdump from ctxshim %s\n", CTXSHIM_VERSION);
	cli_exit_printed();
}

void
cli_exit_printed(void)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_warn("write error on standard output: %s", strerror(errno));
		exit(CLI_EXIT_FATAL);
	}
	exit(CLI_EXIT_OK);
}

long long
cli_parse_num(const char *s, const char *what, long long min, long long max)
{
	long long v;
	char *end;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		cli_usage_err("invalid %s: '%s'", what, s);
	/* a number out of a range that is worth naming (not 1 to INT_MAX) */
	if ((v < min || v > max) && max < INT_MAX)
		cli_usage_err("invalid %s: '%s' (%lld to %lld)", what, s, min, max);
	if (v < min || v > max)
		cli_usage_err("invalid %s: '%s'", what, s);
	return v;
}

size_t
cli_parse_stack_size(const char *s)
{
	unsigned long long v, mul = 1;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		cli_usage_err("invalid stack size: '%s'", s);
	if (*end == 'K' || *end == 'k')
		mul = 1024, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1024 * 1024, end++;
	/* 64K, 64KiB, 64KB, 65536, 65536B; not 65536iB */
	if (*end && strcmp(end, "B") != 0 && (mul == 1 || strcmp(end, "iB") != 0))
		cli_usage_err("invalid stack size: '%s'", s);
	if (v > CLI_MAX_STACK_SIZE / mul)
		cli_usage_err("stack size '%s' is larger than 8M", s);
	if (v * mul < CLI_MIN_STACK_SIZE)
		cli_usage_err("stack size '%s' is smaller than 4K", s);
	return (size_t)(v * mul);
}

/* In longopts, the options that the long option arg (--name or
 * --name=value) names: the one of that name, else those it abbreviates;
 * into *first the first of them.  Returns how many. */
static unsigned
long_matches(const struct option *longopts,
	     const char *arg,
	     const struct option **first)
{
	const char *name = arg + 2;
	size_t len = strcspn(name, "=");
	const struct option *o;
	unsigned n = 0;

	*first = NULL;
	for (o = longopts; o->name; o++) {
		if (strncmp(o->name, name, len) != 0)
			continue;
		if (!o->name[len]) {
			*first = o;
			return 1;
		}
		if (!n++)
			*first = o;
	}
	return n;
}

void
cli_option_error(int c,
		 char *const *argv,
		 const struct option *longopts,
		 bool short_form)
{
	const char *arg = argv[optind - 1];
	const struct option *o;
	unsigned n;

	/* getopt_long gives '?' and the option's value in optopt for a long
	 * option given an argument it does not take, and '?' with 0 for an
	 * abbreviation of several: told from an unknown short option after
	 * arg ("--pid=1 -xj": optind is still at -xj) by the value. */
	if (c == '?' && strncmp(arg, "--", 2) == 0 && arg[2]) {
		n = long_matches(longopts, arg, &o);
		if (n == 1 && optopt && o->val == optopt && o->has_arg == no_argument &&
		    strchr(arg, '='))
			cli_usage_err("option '--%s' doesn't allow an argument",
				      o->name);
		if (n > 1 && !optopt) {
			char list[512] = "";
			size_t len = strcspn(arg + 2, "="), used = 0;

			for (; o->name; o++)
				if (strncmp(o->name, arg + 2, len) == 0 &&
				    used < sizeof(list))
					used += (size_t)snprintf(list + used,
								 sizeof(list) - used,
								 " '--%s'", o->name);
			cli_usage_err("option '%.*s' is ambiguous; possibilities:%s",
				      (int)(len + 2), arg, list);
		}
	}
	if (c == ':') {
		/* getopt_long sets optopt to a long option's value too: name
		 * the option as it was written. */
		if (short_form && optopt && strncmp(argv[optind - 1], "--", 2) != 0)
			cli_usage_err("option requires an argument -- '%c'", optopt);
		cli_usage_err("option '%s' requires an argument", argv[optind - 1]);
	}
	if (optopt)
		cli_usage_err("invalid option -- '%c'", optopt);
	cli_usage_err("unrecognized option '%s'", argv[optind - 1]);
}

const char *
cli_operand(int argc, char *const *argv, const char *what)
{
	if (optind >= argc)
		cli_usage_err("no %s specified", what);
	/* ctxdump $(pidof nginx): say that one is taken, not only that
	 * the second is unexpected */
	if (argc - optind > 1)
		cli_usage_err("unexpected argument: '%s' (one %s only)",
			      argv[optind + 1], what);
	return argv[optind];
}

const char *
cli_pid_operand(int argc, char *const *argv, const char *opt_pid)
{
	if (!opt_pid)
		return cli_operand(argc, argv, "process id");
	/* name the --pid value: "-pq PID" takes q for the process id */
	if (optind < argc)
		cli_usage_err("unexpected argument: '%s' (the process id is given "
			      "with --pid: '%s')",
			      argv[optind], opt_pid);
	return opt_pid;
}

uint64_t
cli_hash_seed(void)
{
	static uint64_t seed;
	static bool drawn;

	if (!drawn) {
		/* Without getrandom(): what an input cannot know in advance
		 * either (ASLR, time, pid). */
		if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(seed)) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			seed = (uint64_t)(uintptr_t)&seed ^ (uint64_t)ts.tv_nsec << 20 ^
			       (uint64_t)getpid();
		}
		drawn = true;
	}
	return seed;
}
