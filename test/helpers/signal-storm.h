/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The signal storms of curl-jump and curl-fork: another thread sends a
 * signal every few microseconds while the target thread runs the hooks. */

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

/* Sends sig to t every 3 us for min_ms, and on a loaded machine longer,
 * up to 10 s, until *count (what the signals made happen: jumps, forks)
 * reaches want: too few would not say the stress ran. */
static inline void
signal_storm(pthread_t t, int sig, atomic_int *count, int want, long min_ms)
{
	struct timespec start, now, pause = {.tv_nsec = 3000};
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		(void)pthread_kill(t, sig);
		nanosleep(&pause, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (now.tv_sec - start.tv_sec) * 1000 +
		     (now.tv_nsec - start.tv_nsec) / 1000000;
	} while (ms < min_ms || (atomic_load(count) < want && ms < 10000));
}
