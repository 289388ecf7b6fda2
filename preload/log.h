/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Diagnostics for people deploying the shim.  Off unless CTXSHIM_LOG is set
 * ("stderr" or a file path); never written to the application's stdout.
 * Not for hot paths: hooks log only once per condition. */
/* The log's descriptor (-1: off).  The socket hooks reset it when the
 * application closes or replaces that number (see conn.c). */
extern int ctxshim_log_fd;

/* cold: calls sit on rare paths; gcc moves those out of the hot code. */
void ctxshim_log_open(const char *target) __attribute__((cold));
void ctxshim_log(const char *fmt, ...) __attribute__((cold, format(printf, 1, 2)));
/* Opens path for the log or the event log (O_CLOEXEC, appending, never
 * waiting for a FIFO's reader); a descriptor, or -1 with errno. */
int ctxshim_sink_open(const char *path);
/* One write to the log or the event log that never raises SIGPIPE in the
 * application (log.c); *kind is the caller's cache of what fd is. */
ssize_t ctxshim_sink_write(int fd, int *kind, const void *buf, size_t len);
/* After fork: the child keeps the parent's log fd (it is inherited). */
