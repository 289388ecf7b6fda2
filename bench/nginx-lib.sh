# SPDX-License-Identifier: Apache-2.0
#
# Shell functions shared by bench/run.sh and bench/record-overhead.sh:
# medians and ratios, and the nginx + wrk scaffolding of their nginx rows
# (one configuration, started, waited for and stopped the same way).
# Sourced (POSIX sh); it keeps no state of its own: every function takes
# what it needs as arguments or sets the variable its comment names.  POSIX
# sh has no local variables: the ones used inside start with "_" and the
# function's initials, so that they cannot clobber a caller's loop counter.
# shellcheck disable=SC2034 # NGX_PID, NGX_PIN, ...: set for the caller

# median of the numbers on stdin (one per line)
median() {
	sort -g | awk '{ v[NR] = $1 }
		END { if (NR == 0) print "nan";
		      else if (NR % 2) print v[(NR + 1) / 2];
		      else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratios FILE A B: column A / column B of each line of FILE (B > 0), one
# per line.  Each line is one pair (or triple) of runs made back to back,
# so a ratio compares runs that saw the same background load.
ratios() {
	awk -v a="$2" -v b="$3" '$b > 0 { printf "%.6f\n", $a / $b }' "$1"
}

# ratio FILE A B [FORMAT]: the median of ratios FILE A B, which drops the
# pairs a burst hit.
ratio() {
	ratios "$1" "$2" "$3" | median | awk -v f="${4:-%.2f}" '{ printf f, $1 }'
}

# ratio_ci FILE A B [FORMAT]: the 95 % interval of ratio's median, as
# "LOW-HIGH": the k-th smallest and the k-th largest of the per-line
# ratios, k the largest rank with P(Binomial(n, 1/2) < k) <= 0.025 (the
# sign test's interval).  It holds the true median in at least 95 % of
# runs whatever the ratios' distribution, which on a shared host is
# anything but normal; the binomial terms are summed from logarithms so
# that no term underflows before it matters.  "-" for fewer than 6 lines,
# where no pair of ranks covers 95 %.
ratio_ci() {
	ratios "$1" "$2" "$3" | sort -g | awk -v f="${4:-%.2f}" '{ v[NR] = $1 }
		END {
			n = NR; k = 0; lp = n * log(0.5); c = exp(lp)
			for (j = 0; j < n / 2 && c <= 0.025; j++) {
				k = j + 1
				lp += log((n - j) / (j + 1))
				c += exp(lp)
			}
			if (k == 0) print "-"
			else printf f "-" f "\n", v[k], v[n + 1 - k]
		}'
}

# is TCP port $1 of 127.0.0.1 free (nothing listening)?
port_free() {
	! grep -qi "^ *[0-9]*: [0-9A-F]*:$(printf '%04X' "$1") [0-9A-F:]* 0A" \
		/proc/net/tcp 2>/dev/null
}

# is process $1 running (not gone, not a zombie waiting to be reaped)?
alive() {
	_al_st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -n "$_al_st" ] && [ "$_al_st" != Z ]
}

# cg_workdir TOOL KEEP PORT: for a callgrind script named TOOL, a work
# directory W with the pages nginx serves (W/www), removed at exit unless
# KEEP is 1 (nginx under callgrind, $CGPID, is stopped then too), and P,
# the first free port from PORT on
cg_workdir() {
	W=$(mktemp -d "/tmp/ctxshim-$1.XXXXXX")
	_cg_tool=$1
	_cg_keep=$2
	CGPID=
	trap cg_cleanup EXIT
	trap 'exit 130' INT TERM HUP
	chmod 755 "$W"
	ngx_www "$W/www"
	P=$3
	while ! port_free "$P"; do
		P=$((P + 1))
	done
}

cg_cleanup() {
	if [ -n "$CGPID" ]; then
		kill "$CGPID" 2>/dev/null
		wait "$CGPID" 2>/dev/null
	fi
	if [ "$_cg_keep" = 1 ]; then
		echo "$_cg_tool: profiles kept in $W" >&2
	else
		rm -rf "$W"
	fi
}

# cg_up PORT DIR: wait until nginx under callgrind (pid $CGPID, started
# in DIR with its output in DIR/vg.out) listens on PORT; 1, with its
# output on stderr, if it died or took over 30 s
cg_up() {
	_cg_i=0
	while port_free "$1"; do
		_cg_i=$((_cg_i + 1))
		if [ $_cg_i -gt 600 ] || ! alive "$CGPID"; then
			echo "nginx did not start under callgrind:" >&2
			cat "$2/vg.out" "$2/error.log" >&2
			return 1
		fi
		sleep 0.05
	done
}

# cg_down WAKE...: wait for nginx under callgrind ($CGPID), told to exit,
# to be gone, then reap it.  One that missed its signal (it may come while
# valgrind runs no thread of it) gets it again every 2 s, followed by the
# command WAKE... (a connection: an event that wakes its loop); killed
# after 20 s.
cg_down() {
	_cg_i=0
	while alive "$CGPID"; do
		_cg_i=$((_cg_i + 1))
		if [ $((_cg_i % 40)) -eq 0 ]; then
			kill "$CGPID" 2>/dev/null
			"$@" >/dev/null 2>&1
		fi
		[ $_cg_i -gt 400 ] && kill -KILL "$CGPID" 2>/dev/null
		sleep 0.05
	done
	wait "$CGPID"
	CGPID=
}

# ngx_conf DIR PORT ROOT [single]: the configuration of every benchmarked
# nginx, in DIR/nginx.conf, serving the files of ROOT on 127.0.0.1:PORT
# with keep-alive; "single" runs it as one process (master_process off,
# for callgrind), otherwise a master and 1 worker.  BENCH_SENDFILE=on
# serves the file with sendfile(2), as Debian's stock nginx.conf does
# (nginx's own default, and the benchmarks', is off: read + writev).
ngx_conf() {
	mkdir -p "$1/tmp"
	cat >"$1/nginx.conf" <<-EOF
	worker_processes 1;
	daemon off;
	$([ "${4:-}" = single ] && echo "master_process off;")
	pid $1/nginx.pid;
	error_log $1/error.log warn;
	events { worker_connections 1024; }
	http {
		access_log off;
		keepalive_requests 1000000;
		keepalive_timeout 60s;
		sendfile ${BENCH_SENDFILE:-off};
		client_body_temp_path $1/tmp/body;
		proxy_temp_path $1/tmp/proxy;
		fastcgi_temp_path $1/tmp/fastcgi;
		uwsgi_temp_path $1/tmp/uwsgi;
		scgi_temp_path $1/tmp/scgi;
		server {
			listen 127.0.0.1:$2;
			root $3;
		}
	}
	EOF
}

# ngx_start DIR [LD_PRELOAD]: start the nginx of DIR/nginx.conf in the
# background (output in DIR/out); NGX_PID is its master.  The caller's
# prefix command for the measured processes (nice, taskset) comes from
# $NGX_PREFIX, split into words.
ngx_start() {
	# shellcheck disable=SC2086 # NGX_PREFIX is a command and its options
	LD_PRELOAD=${2:-} OTEL_SERVICE_NAME=bench-nginx \
		${NGX_PREFIX:-} nginx -p "$1" -c "$1/nginx.conf" -e "$1/error.log" \
		>"$1/out" 2>&1 &
	NGX_PID=$!
}

# ngx_up PORT: wait (5 s at most) until nginx answers on PORT
ngx_up() {
	_nu_i=0
	while ! curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/small.html"; do
		_nu_i=$((_nu_i + 1))
		[ $_nu_i -gt 50 ] && return 1
		sleep 0.1
	done
}

# the (first) worker of nginx master $1
ngx_worker() {
	ps -o pid= --ppid "$1" | head -n 1 | tr -d ' '
}

# ngx_stop PID...: stop nginx masters (they stop their workers), wait up to
# 5 s for them to exit, then kill what is left.  Works whether or not they
# are children of this shell (a child is reaped: `wait` returns at once for
# a process that is not).
ngx_stop() {
	for _ns_pid in "$@"; do
		kill "$_ns_pid" 2>/dev/null
	done
	_ns_i=0
	while [ $_ns_i -lt 50 ]; do
		_ns_left=
		for _ns_pid in "$@"; do
			alive "$_ns_pid" && _ns_left=1
		done
		[ -z "$_ns_left" ] && break
		sleep 0.1
		_ns_i=$((_ns_i + 1))
	done
	for _ns_pid in "$@"; do
		if alive "$_ns_pid"; then
			# its workers too: a killed master leaves them running
			for _ns_w in $(ps -o pid= --ppid "$_ns_pid"); do
				kill -KILL "$_ns_w" 2>/dev/null
			done
			kill -KILL "$_ns_pid" 2>/dev/null
		fi
		wait "$_ns_pid" 2>/dev/null
	done
	return 0
}

# the small static file every benchmarked nginx serves: DIR/small.html,
# 612 bytes (the size of nginx's default index page)
ngx_www() {
	mkdir -p "$1"
	awk 'BEGIN { for (i = 0; i < 612; i++) printf "%c", 97 + i % 26 }' \
		>"$1/small.html"
	chmod -R a+rX "$1"
}

# p99 of a wrk --latency report, in microseconds
wrk_p99_us() {
	awk '$1 == "99%" {
		v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
		m = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1000000 : 0
		print v * m }' "$1"
}

wrk_rps() {
	sed -n 's/^Requests\/sec: *\([0-9.]*\)/\1/p' "$1"
}

# requests wrk completed ("N requests in 3.00s, ...")
wrk_reqs() {
	awk '$2 == "requests" && $3 == "in" { print $1 }' "$1"
}

# seconds the wrk run took, from the same line ("in 799.73ms," "in 1.10s,"
# "in 1.00m,")
wrk_secs() {
	awk '$2 == "requests" && $3 == "in" {
		v = $4; u = v; sub(/,$/, "", v); sub(/[a-z]+,?$/, "", v)
		sub(/^[0-9.]+/, "", u); sub(/,$/, "", u)
		m = (u == "us") ? 1e-6 : (u == "ms") ? 1e-3 : (u == "m") ? 60 : (u == "h") ? 3600 : 1
		print v * m }' "$1"
}

# bench_pin auto|off|"NGINX_CPU WRK_CPU": sets NGX_PIN and WRK_PIN, the
# taskset prefixes that give nginx (its worker inherits the master's CPU)
# and wrk a CPU each, and PIN_DESC; all empty when off, without taskset or
# with fewer than 2 CPUs.  Unpinned, the scheduler sometimes puts both on
# one CPU, or moves them, and a run's requests/s and tail latency follow
# where they landed, not what is measured.  "auto": the first two CPUs
# this shell may use, wrk on the first.
bench_pin() {
	NGX_PIN=
	WRK_PIN=
	PIN_DESC=
	_bp=$1
	if [ "$_bp" = auto ]; then
		_bp=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status |
			tr ',' '\n' |
			awk -F- '{ hi = (NF > 1) ? $2 : $1; for (c = $1; c <= hi; c++) print c }' |
			awk 'NR <= 2 { c[NR] = $1 } END { if (NR >= 2) print c[2], c[1] }')
	fi
	case $_bp in
	off | "" | *[!0-9\ ]* | *" "*" "*) return 0 ;;
	*" "*) ;;
	*) return 0 ;;
	esac
	command -v taskset >/dev/null || return 0
	NGX_PIN="taskset -c ${_bp% *}"
	WRK_PIN="taskset -c ${_bp#* }"
	PIN_DESC="nginx on CPU ${_bp% *}, wrk on CPU ${_bp#* }"
}
