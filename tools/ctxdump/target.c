/* SPDX-License-Identifier: Apache-2.0 */
/* Which thread of the target to address its maps and memory through
 * (dump.h): the process itself, or a live thread when the main thread
 * has exited.  Shared by the one-shot dump and `ctxdump record`, and kept
 * out of ctxdump.c (the main) so that the fuzz harnesses, which link every
 * ctxdump source but the main, link record.c too. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "elf-tls.h"
#include "remote.h"
#include "stop.h"

pid_t
dump_memory_pid(pid_t pid, char leader_state)
{
	char path[64], comm[64], state;
	struct dirent *de;
	pid_t found = pid;
	DIR *dir;

	if (!leader_state &&
	    stop_read_task_stat(pid, pid, comm, sizeof(comm), &leader_state) < 0)
		return pid;
	if (leader_state != 'Z' && leader_state != 'X')
		return pid;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return pid;
	while ((de = readdir(dir)) != NULL) {
		pid_t tid = stop_task_tid(de->d_name);

		if (!tid || tid == pid)
			continue;
		if (stop_read_task_stat(pid, tid, comm, sizeof(comm), &state) == 0 &&
		    state != 'Z' && state != 'X') {
			found = tid;
			break;
		}
	}
	closedir(dir);
	return found;
}

int
dump_proc_load(pid_t pid, pid_t *mem_pid, struct etls_proc **ep)
{
	int r = etls_proc_load(*mem_pid, ep);
	unsigned i;

	for (i = 0; i < 3 && r == -ESRCH && *mem_pid != pid; i++) {
		/* the thread read for a leader that has exited is gone too:
		 * another one */
		pid_t next = dump_memory_pid(pid, 'Z');

		if (next == *mem_pid)
			break;
		*mem_pid = next;
		r = etls_proc_load(*mem_pid, ep);
	}
	return r;
}

/* Whether pid is a kernel thread (PF_KTHREAD in the flags, field 9 of
 * /proc/PID/stat): its maps are empty like those of a process that has
 * exited, but it has not. */
bool
dump_is_kthread(pid_t pid)
{
	char path[64], *buf, *p;
	unsigned long long flags = 0;
	size_t len;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (remote_read_file(path, 4096, &buf, &len) < 0)
		return false;
	/* the fields after the name, which may hold spaces and ')' */
	p = strrchr(buf, ')');
	for (field = 2; p && field < 9; field++) {
		p = strchr(p + 1, ' ');
		if (p)
			p++;
	}
	if (p)
		flags = strtoull(p, NULL, 10);
	free(buf);
	return (flags & 0x00200000ull) != 0; /* PF_KTHREAD */
}

const char *
dump_exited_note(pid_t pid)
{
	char comm[64], state;

	if (stop_read_task_stat(pid, pid, comm, sizeof(comm), &state) == 0 &&
	    state == 'Z')
		return " (zombie, not reaped yet)";
	return "";
}
