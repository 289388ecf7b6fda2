/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The debug event log (CTXSHIM_EVENTS=PATH): one line per change of a
 * thread's published context, for people asking "why is my context
 * missing?" and for tests of event-loop servers, where a one-shot dump
 * would be luck.  Off by default; when off, a hook pays one predictable
 * branch on a global. */

#include <stdbool.h>

struct ctxshim_ctx;

extern int ctxshim_events_fd;

enum ctxshim_ev {
	CTXSHIM_EV_ATTACH, /* a context became current on this thread */
	CTXSHIM_EV_SWITCH, /* the thread moved to another connection's context */
	CTXSHIM_EV_DETACH, /* the thread has no context any more */
};

static inline bool
ctxshim_events_on(void)
{
	return __builtin_expect(ctxshim_events_fd >= 0, 0);
}

/* Open the log; path "stderr" is allowed.  Called by the constructor. */
void ctxshim_events_open(const char *path);
/* One line: "<CLOCK_MONOTONIC ns> tid=<tid> fd=<fd> <event> trace=<hex|->
 * span=<hex|-> reason=<reason>".  c may be NULL (detach).  Lines are
 * written with one write(2) each, so lines from threads and from forked
 * children sharing the file do not interleave. */
void ctxshim_event(enum ctxshim_ev ev,
		   int fd,
		   const struct ctxshim_ctx *c,
		   const char *reason) __attribute__((cold));

#define CTXSHIM_EVENT(ev, fd, c, reason)                          \
	do {                                                      \
		if (ctxshim_events_on())                          \
			ctxshim_event((ev), (fd), (c), (reason)); \
	} while (0)
