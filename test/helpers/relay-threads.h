/* SPDX-License-Identifier: Apache-2.0 */
/* Relays of threads, for targets whose threads all live a short time
 * (exits.c, relay.c): each thread sleeps relay_life_ns in relay_wait(),
 * starts the next and ends. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

static long relay_life_ns = 30 * 1000 * 1000;
/* set: a relay whose next thread cannot be created ends the relay */
static atomic_bool relay_stop;

static __attribute__((noinline)) void
relay_wait(void)
{
	struct timespec ts = {relay_life_ns / 1000000000L, relay_life_ns % 1000000000L};

	nanosleep(&ts, NULL);
	__asm__ volatile(""); /* no tail call: relay_wait stays on the stack */
}

static void *
relay(void *arg)
{
	pthread_attr_t attr;
	pthread_t t;

	relay_wait();
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	while (!atomic_load(&relay_stop) && pthread_create(&t, &attr, relay, arg) != 0)
		relay_wait();
	pthread_attr_destroy(&attr);
	return NULL;
}

/* k relays, started relay_life_ns / k apart so that their ends spread
 * over a lifetime; false if a thread could not be created. */
static bool
relay_start(unsigned k)
{
	pthread_attr_t attr;
	unsigned i;
	bool ok = true;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (i = 0; ok && i < k; i++) {
		struct timespec gap = {0, relay_life_ns / k};
		pthread_t t;

		ok = pthread_create(&t, &attr, relay, NULL) == 0;
		nanosleep(&gap, NULL);
	}
	pthread_attr_destroy(&attr);
	return ok;
}
