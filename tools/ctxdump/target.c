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

#include "dump.h"
#include "elf-tls.h"
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
