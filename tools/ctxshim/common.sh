# shellcheck shell=sh
# SPDX-License-Identifier: Apache-2.0
#
# Functions shared by ctxshim and ctxshim-entrypoint.  meson pastes this file
# into both scripts at build time (the CTXSHIM_COMMON placeholder of the .in
# templates), so each installed script stands alone: the entrypoint is often
# copied into a container image by itself.
#
# POSIX sh has no local variables: every function here uses and sets globals
# prefixed with ctx_.  Only tools that coreutils and busybox both provide are
# used (od, dd, stat, awk, tr, head); binutils are usually absent where these
# checks matter most (slim container images).

# The tools these scripts run (od, dd, awk, …) run without the caller's
# LD_PRELOAD: they need neither the shim nor, say, a sanitizer runtime
# meant for the command.  ctx_preload is the caller's value; the scripts
# hand it, with the shim appended, to the command only.
# shellcheck disable=SC2034 # read by the scripts that include this
ctx_preload=${LD_PRELOAD-}
unset LD_PRELOAD

# ctx_env_restore: give every variable that the caller exported the value
# it had (ctxshim_env0, taken first thing by each script), LD_PRELOAD
# aside: the scripts' own variables (lib, command, ctx_…) must not change
# the environment of the command they start.  Skipped when nothing
# changed, and when the shell cannot assign one of them (bash's read-only
# SHELLOPTS, which nothing here changes then).
ctx_env_restore() {
	# shellcheck disable=SC2154 # set by the script that includes this
	if [ "$(export -p)" != "$ctxshim_env0" ] &&
		(eval "$ctxshim_env0") >/dev/null 2>&1; then
		eval "$ctxshim_env0"
	fi
}

# ctx_lost_env: the caller's variables whose names a shell variable cannot
# have (a.b, x-y: docker and Kubernetes allow them), as NAME=VALUE words
# quoted for eval.  The shell dropped them when it started (dash, busybox
# sh), but /proc/$$/environ still has them.  Nothing when there are none,
# or when awk cannot split at NUL bytes (busybox awk).
ctx_lost_env() {
	# Called once LD_PRELOAD names the shim: its awk must not load it
	# (it would publish, and write to CTXSHIM_LOG as if it were the
	# command).  Called in $(...), so the command keeps the variable.
	unset LD_PRELOAD
	[ -r "/proc/$$/environ" ] || return 0
	[ "$(printf 'a\000b\000' | awk 'BEGIN { RS = "\000" } END { print NR }')" = 2 ] ||
		return 0
	LC_ALL=C awk 'BEGIN { RS = "\000"; q = "\047" }
	/=/ && !/^[A-Za-z_][A-Za-z0-9_]*=/ {
		n = split($0, p, q); s = p[1]
		for (i = 2; i <= n; i++) s = s q "\\" q q p[i]
		printf " %s%s%s", q, s, q
	}' "/proc/$$/environ"
}

# ctx_exec COMMAND [ARG...]: exec COMMAND.  The variables of ctx_lost_env
# go back through env(1), which then execs COMMAND (same pid, same
# arguments); LD_PRELOAD goes that way too, so env itself runs without it.
ctx_exec() {
	set -- "$(ctx_lost_env)" "$@"
	# env takes a command with "=" in its name for one more variable,
	# and runs the first argument in its place: such a command is
	# exec'd here, without those variables, and the caller is told.
	case $1:$2 in
	?*:*=*)
		printf '%s: warning: %s runs without%s: variables of such names go through env(1), which would take a command name with "=" for one more\n' \
			"${0##*/}" "$2" "$(eval "set -- $1" && for w; do printf ' %s' "${w%%=*}"; done)" >&2
		shift
		exec "$@"
		;;
	esac
	if [ -n "$1" ] && command -v env >/dev/null 2>&1; then
		if [ -n "${LD_PRELOAD+set}" ]; then
			eval "shift; set -- \"LD_PRELOAD=\$LD_PRELOAD\" $1 \"\$@\""
			unset LD_PRELOAD
		else
			eval "shift; set -- $1 \"\$@\""
		fi
		exec env -- "$@"
	fi
	shift
	exec "$@"
}

# ctx_path_search NAME: set ctx_found to the file execvp() would run for NAME
# (PATH lookup, no shell builtins or functions).  Returns 0 when found and
# executable, 2 when only a non-executable file (or a directory) of that
# name exists (execvp fails with EACCES), 1 when nothing is found.
ctx_path_search() {
	ctx_found=
	case $1 in
	*/*)
		ctx_found=$1
		[ -e "$1" ] || return 1
		if [ ! -x "$1" ] || [ -d "$1" ]; then
			return 2
		fi
		return 0
		;;
	esac
	ctx_noexec=
	ctx_rest=${PATH-/bin:/usr/bin}:
	while [ -n "$ctx_rest" ]; do
		ctx_dir=${ctx_rest%%:*}
		ctx_rest=${ctx_rest#*:}
		[ -n "$ctx_dir" ] || ctx_dir=.
		# A directory (or a FIFO) of that name fails execve() with
		# EACCES, which execvp() remembers and goes on after.
		if [ -e "$ctx_dir/$1" ]; then
			if [ -f "$ctx_dir/$1" ] && [ -x "$ctx_dir/$1" ]; then
				ctx_found=$ctx_dir/$1
				return 0
			fi
			[ -n "$ctx_noexec" ] || ctx_noexec=$ctx_dir/$1
		fi
	done
	if [ -n "$ctx_noexec" ]; then
		ctx_found=$ctx_noexec
		return 2
	fi
	return 1
}

# ctx_eacces_hint FILE: set ctx_hint to why execve() of FILE, which
# ctx_path_search found but cannot run (status 2), fails with EACCES: the
# words after "Permission denied", which alone do not tell a directory, a
# missing x bit and a noexec mount apart.  Root may run a file with any x
# bit, so then only the mount (or a security module) is left.
ctx_eacces_hint() {
	if [ -d "$1" ]; then
		ctx_hint=" (a directory)"
	elif [ ! -f "$1" ]; then
		ctx_hint=" (not a regular file)"
	else
		case $(stat -L -c %A -- "$1" 2>/dev/null) in
		-*[xst]*)
			if [ "$(id -u)" = 0 ]; then
				ctx_hint=" (on a file system mounted noexec?)"
			else
				ctx_hint=" (not executable by uid $(id -u), or on a file system mounted noexec)"
			fi
			;;
		-*) ctx_hint=" (no execute permission)" ;;
		*) ctx_hint= ;;
		esac
	fi
}

# ctx_out PROG [STATUS]: copy standard input (a --help or --version text,
# a command's result) to standard output.  When that cannot be written,
# say so in PROG's name and exit STATUS (1 if not given), as util-linux's
# close_stdout() does ("PROG: write error: No space left on device"), not
# in cat's ("cat: write error: ...").  A closed standard output fails the
# redirection to fd 3 before cat runs: the shell's message about it is
# dropped, and the reason is not known.  A reader that went away (SIGPIPE)
# ends it silently, as it would a C tool.
ctx_out() {
	ctx_why=
	{ ctx_why=$(cat 2>&1 >&3 3>&-); } 2>/dev/null 3>&1
	ctx_status=$?
	[ $ctx_status -ne 0 ] || return 0
	[ $ctx_status -le 128 ] || exit $ctx_status
	case $ctx_why in
	*'write error: '*) ctx_why=": ${ctx_why##*write error: }" ;;
	*) ctx_why= ;;
	esac
	printf '%s: write error%s\n' "$1" "$ctx_why" >&2
	exit "${2-1}"
}

# ctx_in_build_tree: this script is the one meson generated in its build
# tree (not an installed or copied one): its directory is that of the
# build tree ($ctxshim_build_dir), which holds the library just built
# ($ctxshim_build_lib).  An installed copy names none (both are empty), so
# it never uses a build tree's library.
ctx_in_build_tree() {
	case $0 in
	*/*) ctx_self_dir=${0%/*} ;;
	*) return 1 ;; # found in PATH: an installed copy
	esac
	# shellcheck disable=SC2154 # set by the script that includes this
	[ -f "$ctxshim_build_lib" ] && ctx_same_file "$ctx_self_dir" "$ctxshim_build_dir"
}

# ctx_same_file A B: A and B name the same file.  POSIX leaves test -ef
# undefined, but dash, bash and busybox sh all have it.
ctx_same_file() {
	# shellcheck disable=SC3013
	[ "$1" -ef "$2" ]
}

# ctx_same_entry ENTRY LIB: the LD_PRELOAD entry ENTRY names the file LIB.
# The loader looks an entry without a "/" up in its search path, never in
# the current directory: such an entry is not compared with a file here.
# $LIB in either is what it is to a 64-bit program (ctx_expand).
ctx_same_entry() {
	case $1 in
	*/*)
		ctx_expand "$2"
		ctx_same_lib=$ctx_expanded
		ctx_expand "$1"
		ctx_same_file "$ctx_expanded" "$ctx_same_lib"
		;;
	*) return 1 ;;
	esac
}

# ctx_expand ENTRY: set ctx_expanded to ENTRY with $LIB and ${LIB} replaced
# by $ctx_dst64, as a 64-bit program's loader reads it.  Left as it is
# when that is not known (no file has such a name then).
ctx_expand() {
	ctx_expanded=$1
	[ -n "${ctx_dst64-}" ] || return 0
	while :; do
		case $ctx_expanded in
		*"$ctx_tok_blib"*)
			ctx_expanded=${ctx_expanded%%"$ctx_tok_blib"*}$ctx_dst64${ctx_expanded#*"$ctx_tok_blib"}
			;;
		*"$ctx_tok_lib"*)
			ctx_expanded=${ctx_expanded%%"$ctx_tok_lib"*}$ctx_dst64${ctx_expanded#*"$ctx_tok_lib"}
			;;
		*) return 0 ;;
		esac
	done
}

# The loader's token, as it is written (not a variable of this script).
ctx_tok_lib="\$LIB"
ctx_tok_blib="\${LIB}"

# The loaders of x86_64 and i386 programs (their PT_INTERP), fixed by the
# psABIs.
ctx_ld64=/lib64/ld-linux-x86-64.so.2
ctx_ld32=/lib/ld-linux.so.2

# ctx_loader_dst LOADER: set ctx_dst to what the glibc loader LOADER of this
# host expands the token $LIB to: its own answer (ld.so
# --list-diagnostics, glibc 2.33 and later).  Empty when LOADER does not
# exist or does not say: no guess is made for the host, where a wrong one
# would make every program print that it cannot preload the library.
ctx_loader_dst() {
	ctx_dst=
	[ -f "$1" ] || return 0
	# (the shell only: no sed or grep in a slim image)
	ctx_diag='
'$("$1" --list-diagnostics 2>/dev/null </dev/null)
	case $ctx_diag in
	*'
dl_dst_lib="'*)
		ctx_dst=${ctx_diag#*'
dl_dst_lib="'}
		ctx_dst=${ctx_dst%%\"*}
		;;
	esac
}

# ctx_dst_guess REALPATH FILE: set ctx_dst to what a loader installed at
# REALPATH (symbolic links resolved) expands $LIB to, without running it
# (an image's loader, say): glibc's $LIB is its library directory
# (slibdir, where the loader is installed too) without the leading / or
# /usr/, as "lib64", "lib32", Debian's "lib/x86_64-linux-gnu".  Only when
# that string is in FILE, the loader, as one of its strings: else empty.
ctx_dst_guess() {
	ctx_dst=${1%/*}
	ctx_dst=${ctx_dst#/}
	ctx_dst=${ctx_dst#usr/}
	case $ctx_dst in
	'' | usr | *[!A-Za-z0-9_./-]*)
		ctx_dst=
		return 0
		;;
	esac
	tr '\000' '\n' <"$2" 2>/dev/null |
		awk -v s="$ctx_dst" '$0 == s { f = 1 } END { exit !f }' || ctx_dst=
}

# ctx_stub32 FILE: FILE is the empty 32-bit libctxshim.so, whole: an i386
# ELF shared object with the note of preload/stub-i386.s (owner "ctxshim",
# type 1), every segment of it in the file.  Any other 32-bit file of
# that name must not get an entry with $LIB: a real library would run its
# code in every 32-bit program, and one cut short makes each of them
# crash in its loader (SIGSEGV or SIGBUS on the missing pages).
ctx_stub32() {
	ctx_sf=$1
	# A FIFO or a device there would block od's open, or feed it for ever.
	[ -f "$ctx_sf" ] || return 1
	# shellcheck disable=SC2046 # split into bytes on purpose
	set -- $(ctx_bytes "$ctx_sf" 0 52)
	[ $# -eq 52 ] && [ "$1 $2 $3 $4 $5 $6 ${17} ${18} ${19} ${20}" = "127 69 76 70 1 1 3 0 3 0" ] ||
		return 1
	# e_phoff (4 bytes at 28), e_phentsize (2 at 42), e_phnum (2 at 44).
	ctx_phoff=$((${29} + ${30} * 256 + ${31} * 65536 + ${32} * 16777216))
	[ "${43} ${44}" = "32 0" ] && [ "${46}" = 0 ] && [ "${45}" -ge 1 ] || return 1
	ctx_size=$(stat -L -c %s "$ctx_sf" 2>/dev/null) || return 1
	# The first four PT_NOTE segments (4) as "OFFSET SIZE" pairs, and
	# none when a segment ends past the end of the file.
	ctx_phdrs "$ctx_sf" 1 "$ctx_phoff" 32 "${45}" || return 1
	ctx_notes=
	ctx_nnotes=0
	# shellcheck disable=SC2086 # TYPE OFFSET FILESZ words
	set -- $ctx_ph
	while [ $# -ge 3 ]; do
		[ $(($2 + $3)) -le "$ctx_size" ] || return 1
		if [ "$1" = 4 ] && [ "$3" -le 4096 ] && [ $ctx_nnotes -lt 4 ]; then
			ctx_notes="$ctx_notes $2 $3"
			ctx_nnotes=$((ctx_nnotes + 1))
		fi
		shift 3
	done
	[ -n "$ctx_notes" ] || return 1
	# Each note: namesz, descsz, type (4 bytes each), the name and the
	# descriptor, each padded to 4 bytes (the ELF gABI, "Note Section").
	# shellcheck disable=SC2086 # OFFSET SIZE pairs
	set -- $ctx_notes
	while [ $# -ge 2 ]; do
		ctx_bytes "$ctx_sf" "$1" "$2" | awk '
			function u32(o) { return b[o] + b[o + 1] * 256 + b[o + 2] * 65536 + b[o + 3] * 16777216 }
			{ for (i = 1; i <= NF; i++) b[k++] = $i }
			END {
				for (o = 0; o + 12 <= k; o += 12 + int((ns + 3) / 4) * 4 + int((ds + 3) / 4) * 4) {
					ns = u32(o); ds = u32(o + 4)
					if (ns != 8 || u32(o + 8) != 1)
						continue
					for (j = 0; j < 8; j++)
						s = s " " b[o + 12 + j]
					if (s == " 99 116 120 115 104 105 109 0")
						exit 0
					s = ""
				}
				exit 1
			}' && return 0
		shift 2
	done
	return 1
}

# ctx_lib_split LIB DST: set ctx_p and ctx_r to P and R of LIB = P/DST/R;
# false if DST is not a directory of LIB.  The last one:
# /opt/lib/x/lib/ctxshim/libctxshim.so has its own.
ctx_lib_split() {
	case $1 in
	*/"$2"/*) ;;
	*) return 1 ;;
	esac
	ctx_p=${1%/"$2"/*}
	ctx_r=${1#"$ctx_p/$2/"}
}

# ctx_lib_entry LIB DST64 DST32: set ctx_entry to LIB with the directory
# DST64 (what a 64-bit loader expands $LIB to) replaced by the token, and
# ctx_stub to the file that the entry names to a 32-bit program (DST32 in
# that place).  With such an entry in LD_PRELOAD or /etc/ld.so.preload,
# a 32-bit program loads the empty 32-bit libctxshim.so without a word,
# where a 64-bit library makes its loader print "wrong ELF class".  The
# caller checks that ctx_stub is one (ctx_stub32).  Returns 1, with
# ctx_entry LIB, when there is no such entry: LIB is not in DST64, or a
# loader is unknown.
ctx_lib_entry() {
	ctx_entry=$1
	ctx_stub=
	[ -n "$2" ] && [ -n "$3" ] || return 1
	ctx_lib_split "$1" "$2" || return 1
	ctx_stub=$ctx_p/$3/$ctx_r
	ctx_entry=$ctx_p/$ctx_tok_lib/$ctx_r
}

# ctx_host_dsts: set ctx_dst64 and ctx_dst32 to what this host's x86_64
# and i386 loaders expand $LIB to (ctx_loader_dst).  No 32-bit loader: no
# 32-bit program runs here that could complain.
ctx_host_dsts() {
	ctx_loader_dst "$ctx_ld64"
	ctx_dst64=$ctx_dst
	ctx_loader_dst "$ctx_ld32"
	ctx_dst32=$ctx_dst
}

# ctx_stub_near LIB DST64: LIB is in DST64 (P/DST64/R) and the empty
# 32-bit library (ctx_stub32) is at P/*/R or P/*/*/R: ctx_near then.
ctx_stub_near() {
	ctx_near=
	ctx_lib_split "$1" "$2" || return 1
	# The scripts run with pathname expansion off (set -f): on for the
	# two patterns only.
	ctx_globs=$-
	set +f
	set -- "$1" "$ctx_p"/*/"$ctx_r" "$ctx_p"/*/*/"$ctx_r"
	case $ctx_globs in *f*) set -f ;; esac
	ctx_f=$1
	shift
	# (not LIB itself, which the first pattern finds: an od for nothing)
	for ctx_cand in "$@"; do
		[ "$ctx_cand" != "$ctx_f" ] && ctx_stub32 "$ctx_cand" && ctx_near=$ctx_cand && return 0
	done
	return 1
}

# ctx_host_entry LIB: ctx_entry for this host (ctx_lib_entry): LIB with
# $LIB when both loaders say what it is and the 32-bit library is where
# the 32-bit one's expansion points; LIB itself otherwise, and for a LIB
# that is not for x86_64.
ctx_host_entry() {
	ctx_entry=$1
	ctx_elf_machine "$1"
	[ "$ctx_machine" = 62 ] || return 0
	ctx_loader_dst "$ctx_ld64"
	ctx_dst64=$ctx_dst
	ctx_dst32=
	# The 32-bit loader takes some 12 ms to answer (it writes its
	# diagnostics piece by piece): asked only when a 32-bit file of the
	# library's name is one or two directories below the prefix, where
	# its $LIB could point.
	[ -n "$ctx_dst64" ] && ctx_stub_near "$1" "$ctx_dst64" || return 0
	ctx_loader_dst "$ctx_ld32"
	ctx_dst32=$ctx_dst
	if ctx_lib_entry "$1" "$ctx_dst64" "$ctx_dst32" &&
		! { [ "$ctx_stub" = "$ctx_near" ] || ctx_stub32 "$ctx_stub"; }; then
		ctx_entry=$1
	fi
}

# ctx_system_loader INTERP: INTERP, a program's ELF interpreter
# (ctx_inspect), is this system's x86_64 loader, or is not known.  The
# loader of another glibc (Nix's, Guix's, one that a product bundles)
# expands $LIB to its own library directory, where no libctxshim.so is: a
# program of its own gets the library's path (ctx_host_entry).
ctx_system_loader() {
	[ -z "$1" ] || ctx_same_file "$1" "$ctx_ld64"
}

# ctx_preload_words LIST: set ctx_words to LIST with its colons made
# spaces, for a loop over $ctx_words with IFS=' ': the loader splits
# LD_PRELOAD at spaces and colons only (elf/rtld.c, strcspn " :"); a tab
# or a newline is part of a name.
ctx_preload_words() {
	ctx_words=$(printf '%s' "$1" | tr ':' ' ')
}

# ctx_preload_add LIST LIB: print LIST (an LD_PRELOAD value) with LIB
# appended, unless LIB already is one of its entries.  The loader splits
# LD_PRELOAD at spaces and colons; what is there stays first (a sanitizer
# runtime, for instance, must stay first).  An entry naming another
# libctxshim.so (another path) is replaced by LIB in its place: with two
# copies in one process each sees the other's otel_thread_ctx_v1 and both
# stay passive (see ctx_preload_others).  Another path to the same file (the
# install symlink, say) counts as LIB: the loader maps a file once.
ctx_preload_add() {
	ctx_list=
	ctx_have=0
	ctx_other=0
	ctx_preload_words "$1"
	ctx_ifs=$IFS
	IFS=' '
	for ctx_w in $ctx_words; do
		IFS=$ctx_ifs
		case $ctx_w in
		"$2")
			[ $ctx_have = 0 ] || continue
			ctx_have=1
			;;
		libctxshim.so | */libctxshim.so)
			ctx_same_entry "$ctx_w" "$2" || ctx_other=1
			[ $ctx_have = 0 ] || continue
			ctx_same_entry "$ctx_w" "$2" || ctx_w=$2
			ctx_have=1
			;;
		esac
		ctx_list=${ctx_list:+$ctx_list:}$ctx_w
	done
	IFS=$ctx_ifs
	if [ $ctx_other = 1 ]; then
		printf '%s\n' "$ctx_list"
	elif [ $ctx_have = 1 ]; then
		printf '%s\n' "$1"
	elif [ -n "$ctx_list" ]; then
		printf '%s:%s\n' "$1" "$2"
	else
		printf '%s\n' "$2"
	fi
}

# ctx_preload_others LIST LIB: the entries of LIST that ctx_preload_add
# replaces by LIB (another libctxshim.so), one a line.
ctx_preload_others() {
	ctx_preload_words "$1"
	ctx_ifs=$IFS
	IFS=' '
	for ctx_w in $ctx_words; do
		IFS=$ctx_ifs
		case $ctx_w in
		"$2") ;;
		libctxshim.so | */libctxshim.so)
			ctx_same_entry "$ctx_w" "$2" || printf '%s\n' "$ctx_w"
			;;
		esac
	done
	IFS=$ctx_ifs
}

# ctx_bytes FILE OFFSET COUNT: print up to COUNT bytes of FILE from OFFSET
# as decimal numbers on one line.
ctx_bytes() {
	od -An -v -t u1 -j "$2" -N "$3" "$1" 2>/dev/null | tr -s ' \n' '  '
}

# ctx_phdrs FILE CLASS PHOFF PHENTSIZE PHNUM [TYPE]: set ctx_ph to the
# program headers of FILE, a little-endian ELF file of class CLASS (1:
# 32-bit, 2: 64-bit) whose header says PHNUM entries of PHENTSIZE bytes at
# PHOFF (the caller checks those): "TYPE OFFSET FILESZ" (p_type, p_offset,
# p_filesz) for each, in their order, or for those of p_type TYPE only.
# Returns 1 when the file ends before the table does, 2 (reading nothing)
# when the table is larger than 64 KiB: no kernel runs such a program
# (fs/binfmt_elf.c, load_elf_phdrs), and awk would hold all of what a
# hostile header claims (old: up to 4 GiB).  Mainline also refuses a table
# larger than a page (ELF_MIN_ALIGN), but not every kernel does: one that
# exec refuses then fails with its own error, where refusing it here would
# keep run from a program that this kernel may run.  TYPE keeps the
# answer short: a shell loop over many entries is slow in dash (each shift
# copies the rest of the list).
ctx_phdrs() {
	ctx_ph=
	[ $(($4 * $5)) -le 65536 ] || return 2
	ctx_ph=$(od -An -v -t u1 -j "$3" -N $(($4 * $5)) "$1" 2>/dev/null |
		awk -v w=$(($2 * 4)) -v es="$4" -v n="$5" -v type="${6-}" '
		# The M bytes at O; p_offset is at W (the size of a word),
		# p_filesz at 4 W (the gABI).
		function le(o, m, v) { v = 0; while (m--) v = v * 256 + b[o + m]; return v }
		{ for (i = 1; i <= NF; i++) b[k++] = $i }
		END {
			if (k < n * es) exit 1
			for (i = 0; i < n; i++) {
				o = i * es
				if (type == "" || le(o, 4) == type)
					printf "%.0f %.0f %.0f\n", le(o, 4), le(o + w, w), le(o + 4 * w, w)
			}
		}')
}

# ctx_elf_machine FILE: set ctx_machine to the e_machine of the 64-bit
# little-endian ELF file FILE ("" if it is not one).
ctx_elf_machine() {
	ctx_machine=
	# shellcheck disable=SC2046 # split into bytes on purpose
	set -- $(ctx_bytes "$1" 0 20)
	if [ $# -eq 20 ] && [ "$1 $2 $3 $4 $5 $6" = "127 69 76 70 2 1" ]; then
		# shellcheck disable=SC2034 # read by the scripts that include this
		ctx_machine=$((${19} + ${20} * 256))
	fi
}

# esc(a, s, e): bytes a[s] to a[e - 1] (decimal) as text, with what ctxdump
# escapes as \xNN, each byte of the character (tools/ctxdump/output.c,
# output_utf8_next() and output_cp_escaped()): bytes that are not
# well-formed UTF-8, C0, DEL, C1, and the format characters that make a
# terminal show text in another order or hide it (U+061C, U+200B-U+200F,
# U+2028-U+202E, U+2060-U+206F, U+FEFF, U+E0000-U+E007F); a backslash as
# \x5c.  awk runs with LC_ALL=C (a byte is a character): UTF-8 is decoded
# here.  One copy, for ctx_esc_text and ctxshim's pctx_decode.
ctx_awk_esc='
function esc(a, s, e,    o, i, k, l, c, cp) {
	o = ""
	for (i = s; i < e; i += l) {
		c = a[i]; l = 1; cp = c
		if (c >= 128) {
			# the sequence length from the lead byte: C0, C1 (overlong
			# 2-byte forms), continuation bytes and F5-FF lead nothing
			if (c >= 194 && c <= 223) { l = 2; cp = c - 192 }
			else if (c >= 224 && c <= 239) { l = 3; cp = c - 224 }
			else if (c >= 240 && c <= 244) { l = 4; cp = c - 240 }
			else l = 0
			for (k = 1; k < l; k++) {
				if (i + k >= e || a[i + k] < 128 || a[i + k] > 191) { l = 0; break }
				cp = cp * 64 + a[i + k] - 128
			}
			# overlong 3- and 4-byte forms, surrogates, above U+10FFFF
			if ((l == 3 && cp < 2048) || (l == 4 && cp < 65536) ||
				cp > 1114111 || (cp >= 55296 && cp <= 57343)) l = 0
		}
		if (l == 0 || cp < 32 || (cp >= 127 && cp <= 159) || cp == 1564 ||
			(cp >= 8203 && cp <= 8207) || (cp >= 8232 && cp <= 8238) ||
			(cp >= 8288 && cp <= 8303) || cp == 65279 ||
			(cp >= 917504 && cp <= 917631) || cp == 92) {
			# a byte that starts nothing well-formed is escaped alone
			if (l == 0) l = 1
			for (k = 0; k < l; k++) o = o sprintf("\\x%02x", a[i + k])
		} else
			for (k = 0; k < l; k++) o = o sprintf("%c", a[i + k])
	}
	return o
}'

# ctx_esc_text TEXT: TEXT escaped as pctx_decode prints the context's strings
# (a program names itself: its comm and its library paths can hold
# terminal escapes; so can a file's #! line and PT_INTERP).
ctx_esc_text() {
	# Printable ASCII but the backslash, what nearly every call is given
	# (ctx_inspect's verdict on every run and container start): as it is,
	# without starting od and awk.
	case $1 in
	*\\* | *[!\ -~]*) ;;
	*)
		printf '%s' "$1"
		return 0
		;;
	esac
	printf '%s' "$1" | od -An -v -t u1 | LC_ALL=C awk "$ctx_awk_esc"'
	{ for (i = 1; i <= NF; i++) b[n++] = $i }
	END { printf "%s", esc(b, 0, n) }'
}

# ctx_inspect FILE: tell whether a program started from FILE can load an
# LD_PRELOAD library of machine $ctx_host_machine (e_machine of the shim, or
# empty for "don't compare").  Sets ctx_verdict to one of
#   ok       dynamically linked, glibc-style loader: LD_PRELOAD works
#   static   no PT_INTERP: no dynamic loader runs, nothing can be preloaded
#   musl     the interpreter is musl's ld-musl-*: a glibc library cannot load
#   class32  32-bit ELF; the shim is a 64-bit library
#   machine  ELF for another machine or byte order
#   secure   setuid/setgid to another user or group, or file capabilities:
#            the loader runs in secure-execution mode and drops LD_PRELOAD
#   notexec  an ELF file that is not a program (object file, core dump), or
#            one the kernel refuses to run (invalid program headers)
#   cleared  a #! line runs env with options that drop LD_PRELOAD (-i)
#   unknown  unreadable, or neither ELF nor #! (the shell runs it as a script)
# and ctx_why to one sentence that explains it (and ctx_noexec below),
# escaped as ctx_esc_text does, to be printed as it is.  ctx_interp is the ELF
# interpreter when there is one.  Scripts (#!) are followed to their
# interpreter, and through "#!/usr/bin/env PROG" to PROG, up to 5 levels
# like the kernel (fs/exec.c, exec_binprm(): ELOOP once the depth passes
# 5: its comment says 4 levels, but a chain of 5 scripts runs).
# ctx_noexec is set, whatever the verdict, when execve() of FILE would fail
# on an interpreter on the way (ctx_interp_check).
ctx_inspect() {
	ctx_depth=0
	ctx_via=
	ctx_noexec=
	ctx_noexec_status=
	ctx_inspect_file "$1"
	if [ -n "$ctx_via" ]; then
		ctx_why="$ctx_via$ctx_why"
	fi
	# Both name what the files hold (a #! line, a PT_INTERP): a terminal
	# escape there must not reach the terminal of whoever runs check.
	ctx_why=$(ctx_esc_text "$ctx_why")
	[ -z "$ctx_noexec" ] || ctx_noexec=$(ctx_esc_text "$ctx_noexec")
}

ctx_inspect_file() {
	ctx_file=$1
	ctx_verdict=unknown
	ctx_interp=
	if [ ! -f "$ctx_file" ] || [ ! -r "$ctx_file" ]; then
		ctx_why="$ctx_file cannot be read, so it was not checked"
		return 0
	fi
	# shellcheck disable=SC2046 # split into bytes on purpose
	set -- $(ctx_bytes "$ctx_file" 0 64)
	if [ $# -ge 2 ] && [ "$1 $2" = "35 33" ]; then
		ctx_inspect_script
	elif [ $# -ge 4 ] && [ "$1 $2 $3 $4" = "127 69 76 70" ]; then
		ctx_inspect_elf "$@"
	else
		ctx_why="$ctx_file is neither an ELF program nor a #! script, not checked"
	fi
}

ctx_inspect_script() {
	ctx_depth=$((ctx_depth + 1))
	if [ $ctx_depth -gt 5 ]; then
		ctx_why="$ctx_file: too many levels of #! interpreters"
		return 0
	fi
	# The kernel reads the #! line from the first 256 bytes
	# (BINPRM_BUF_SIZE); interpreter and one optional argument.
	ctx_line=$(dd if="$ctx_file" bs=256 count=1 2>/dev/null | tr -d '\000' | head -n 1)
	ctx_line=${ctx_line#??}
	ctx_line=${ctx_line#"${ctx_line%%[! 	]*}"}
	ctx_prog=${ctx_line%%[ 	]*}
	ctx_arg=${ctx_line#"$ctx_prog"}
	if [ -z "$ctx_prog" ]; then
		ctx_why="$ctx_file has an empty #! line"
		return 0
	fi
	ctx_script=$ctx_file
	ctx_interp_check "$ctx_prog"
	# "#!/usr/bin/env [-S] PROG": what matters is PROG.  env's own
	# options and NAME=VALUE words come before it; some of them take
	# LD_PRELOAD away from PROG.
	case ${ctx_prog##*/} in
	env)
		ctx_envprog=
		ctx_envclear=
		ctx_envnext=
		for ctx_w in $ctx_arg; do
			ctx_env_word "$ctx_w" || break
		done
		if [ -n "$ctx_envclear" ]; then
			ctx_verdict=cleared
			ctx_why="$ctx_script is a script for $ctx_prog $ctx_envclear, which starts ${ctx_envprog:-its program} without the LD_PRELOAD that loads the shim"
			return 0
		fi
		if [ -n "$ctx_envprog" ] && ctx_path_search "$ctx_envprog"; then
			# env itself runs first with LD_PRELOAD, then PROG.
			ctx_target=$ctx_found
			ctx_via2="$ctx_via$ctx_script is a script for $ctx_prog $ctx_envprog ($ctx_target); "
			ctx_via="$ctx_via$ctx_script is a script for $ctx_prog; "
			ctx_inspect_file "$ctx_prog"
			case $ctx_verdict in
			ok | unknown) ;;
			*) return 0 ;;
			esac
			ctx_via=$ctx_via2
			ctx_inspect_file "$ctx_target"
			return 0
		fi
		# "#!/usr/bin/env bash" with DOS line endings: env looks for
		# "bash\r" in PATH, finds none, and exits 127.
		case $ctx_envprog in
		*"$(printf '\r')")
			if [ -z "$ctx_noexec" ]; then
				ctx_noexec_status=127
				ctx_noexec="$ctx_via$ctx_script is a script for $ctx_prog ${ctx_envprog%?} with a carriage return after it, which env(1) does not find (a #! line with DOS line endings?)"
			fi
			;;
		esac
		;;
	esac
	ctx_via="$ctx_via$ctx_script is a script for $ctx_prog; "
	ctx_inspect_file "$ctx_prog"
}

# One word of env's arguments on a #! line (coreutils env(1)): options,
# NAME=VALUE, then the program (ctx_envprog; returns 1).  Sets
# ctx_envclear to the words that start the program without our
# LD_PRELOAD: -i (or -, --ignore-environment), -u LD_PRELOAD, or an
# LD_PRELOAD=VALUE without the shim.  ctx_envnext is the option whose
# argument is the next word (u or C), or "-" after "--", which ends the
# options (the next word that is not NAME=VALUE is the program, even if
# it starts with "-").
ctx_env_word() {
	if [ "$ctx_envnext" = - ]; then
		case $1 in
		*=*) ;;
		*)
			ctx_envprog=$1
			return 1
			;;
		esac
	elif [ -n "$ctx_envnext" ]; then
		[ "$ctx_envnext$1" != uLD_PRELOAD ] || ctx_envclear="-u LD_PRELOAD"
		ctx_envnext=
		return 0
	fi
	case $1 in
	-) ctx_envclear=$1 ;;
	--) ctx_envnext=- ;;
	--*) ctx_env_long "$1" ;;
	# env applies -i and -u before NAME=VALUE: a later LD_PRELOAD that
	# names the shim, or keeps env's own with -S's ${LD_PRELOAD}, gives
	# it back to the program.
	LD_PRELOAD=*libctxshim.so* | LD_PRELOAD=*"\${LD_PRELOAD}"*) ctx_envclear= ;;
	LD_PRELOAD=*) ctx_envclear=$1 ;;
	*=*) ;;
	-?*) ctx_env_shorts "${1#-}" ;;
	*)
		ctx_envprog=$1
		return 1
		;;
	esac
}

# One long option of env.  Like getopt_long(3), env takes any prefix of
# an option's name that no other option shares ("--ignore-e", "--u",
# "--s=-i"); an ambiguous or unknown one makes env fail before it starts
# the program, so it clears nothing.
ctx_env_long() {
	ctx_n=${1#--}
	ctx_n=${ctx_n%%=*}
	ctx_lopt=
	for ctx_o in block-signal chdir debug default-signal ignore-environment \
		ignore-signal list-signal-handling null split-string unset help version; do
		case $ctx_o in
		"$ctx_n")
			ctx_lopt=$ctx_o
			break
			;;
		"$ctx_n"*)
			if [ -n "$ctx_lopt" ]; then
				ctx_lopt=ambiguous
			else
				ctx_lopt=$ctx_o
			fi
			;;
		esac
	done
	case $ctx_lopt:$1 in
	ignore-environment:*=*) ;; # takes no argument: env fails
	ignore-environment:*) ctx_envclear=$1 ;;
	unset:*=*) [ "${1#*=}" != LD_PRELOAD ] || ctx_envclear=$1 ;;
	unset:*) ctx_envnext=u ;;
	chdir:*=*) ;;
	chdir:*) ctx_envnext=C ;;
	split-string:*=*) ctx_env_word "${1#*=}" ;;
	esac
}

# Bundled short options of env, without the '-': -i, -0, -v take no
# argument; -u NAME and -C DIR take the rest of the word or the next one;
# -S takes the rest of the word as the start of the split string.
ctx_env_shorts() {
	ctx_s=$1
	while [ -n "$ctx_s" ]; do
		ctx_c=${ctx_s%"${ctx_s#?}"}
		ctx_s=${ctx_s#?}
		case $ctx_c in
		i) ctx_envclear=-i ;;
		u | C)
			if [ -z "$ctx_s" ]; then
				ctx_envnext=$ctx_c
			elif [ "$ctx_c$ctx_s" = uLD_PRELOAD ]; then
				ctx_envclear="-u LD_PRELOAD"
			fi
			return 0
			;;
		S)
			[ -z "$ctx_s" ] || ctx_env_word "$ctx_s"
			return
			;;
		esac
	done
}

# ctx_interp_check INTERP: INTERP, the interpreter that $ctx_file names
# (its #! line or PT_INTERP), is a file the kernel can start.  If not,
# execve() of the command fails as a whole (ENOENT or EACCES) and the
# shell's exec says "exec: ./app: not found" of a file that is there: set
# ctx_noexec to the reason (the first one found) and ctx_noexec_status
# to the status of the shells and env(1) for that errno.
ctx_interp_check() {
	[ -z "$ctx_noexec" ] || return 0
	ctx_noexec_status=126
	if [ -d "$1" ]; then
		ctx_noexec="is a directory"
	elif [ -e "$1" ]; then
		[ -x "$1" ] && return 0
		# with the reason when the mode alone does not show it (x bits
		# on a noexec mount, another user's, not a regular file)
		ctx_eacces_hint "$1"
		[ "$ctx_hint" != " (no execute permission)" ] || ctx_hint=
		ctx_noexec="is not executable$ctx_hint"
	else
		ctx_noexec_status=127
		ctx_noexec="does not exist"
	fi
	ctx_noexec="$ctx_via$ctx_file names the interpreter $1, which $ctx_noexec"
	# A #! line that ends in a carriage return names a file with one,
	# which is never there: say so, and not with the raw character.
	case $1 in
	*"$(printf '\r')")
		ctx_noexec="$ctx_via$ctx_file names the interpreter ${1%?} with a carriage return after it, which does not exist (a #! line with DOS line endings?)"
		;;
	esac
}

# Called with the first 64 bytes of an ELF file as arguments ($1 = 0x7f).
ctx_inspect_elf() {
	case $5 in
	1)
		ctx_verdict=class32
		ctx_why="$ctx_file is a 32-bit program; libctxshim.so is a 64-bit library"
		return 0
		;;
	2) ;;
	*)
		ctx_verdict=machine
		ctx_why="$ctx_file has an unknown ELF class ($5)"
		return 0
		;;
	esac
	if [ "$6" != 1 ]; then
		ctx_verdict=machine
		ctx_why="$ctx_file is a big-endian program; libctxshim.so is little-endian"
		return 0
	fi
	if [ $# -lt 64 ]; then
		ctx_verdict=notexec
		ctx_why="$ctx_file is a truncated ELF file"
		return 0
	fi
	ctx_type=$((${17} + ${18} * 256))
	ctx_mach=$((${19} + ${20} * 256))
	if [ -n "${ctx_host_machine-}" ] && [ "$ctx_mach" != "$ctx_host_machine" ]; then
		ctx_verdict=machine
		ctx_why="$ctx_file is built for another machine (ELF e_machine $ctx_mach; libctxshim.so is $ctx_host_machine)"
		return 0
	fi
	case $ctx_type in
	2 | 3) ;;
	*)
		ctx_verdict=notexec
		ctx_why="$ctx_file is not an executable (ELF type $ctx_type)"
		return 0
		;;
	esac
	# e_phoff (8 bytes at 32), e_phentsize (2 at 54), e_phnum (2 at 56).
	ctx_phoff=$((${33} + ${34} * 256 + ${35} * 65536 + ${36} * 16777216 + ${37} * 4294967296))
	ctx_phentsize=$((${55} + ${56} * 256))
	ctx_phnum=$((${57} + ${58} * 256))
	if [ "${38} ${39} ${40}" != "0 0 0" ] || [ "$ctx_phnum" -eq 0 ]; then
		ctx_verdict=notexec
		ctx_why="$ctx_file has no usable program header table"
		return 0
	fi
	# The kernel loads Elf64_Phdr entries only (load_elf_phdrs), and
	# refuses the program otherwise (old: "ok" for entries of 64 bytes).
	if [ "$ctx_phentsize" != 56 ]; then
		ctx_verdict=notexec
		ctx_why="$ctx_file has an invalid program header table (entries of $ctx_phentsize bytes; the kernel loads those of 56 only)"
		return 0
	fi
	# The first PT_INTERP (p_type 3): 3 OFFSET FILESZ.
	ctx_phdrs "$ctx_file" 2 "$ctx_phoff" "$ctx_phentsize" "$ctx_phnum" 3
	case $? in
	1) ctx_ph=short ;;
	2)
		ctx_verdict=notexec
		ctx_why="$ctx_file has an invalid program header table ($((ctx_phnum * 56)) bytes; the kernel loads 64 KiB at most)"
		return 0
		;;
	esac
	# shellcheck disable=SC2086 # split the answer into words
	set -- $ctx_ph
	case ${1-none} in
	short)
		ctx_verdict=notexec
		ctx_why="$ctx_file is a truncated ELF file"
		return 0
		;;
	none)
		# ld.so itself has no PT_INTERP, but run as a program it is
		# the loader and honours LD_PRELOAD.
		case ${ctx_file##*/} in
		ld-linux*.so* | ld64.so*)
			ctx_verdict=ok
			ctx_why="$ctx_file is the glibc dynamic loader"
			return 0
			;;
		esac
		ctx_verdict=static
		ctx_why="$ctx_file is statically linked (no PT_INTERP): no dynamic loader runs that could load libctxshim.so"
		return 0
		;;
	esac
	# The kernel reads the interpreter's path from the file and refuses
	# a program whose path is not all there (old: "ok", with no
	# interpreter), or does not end in a NUL (old: "ok").  A size or
	# offset of 2^63 or more is a number too long for [ (it failed, and
	# the size was not checked at all).
	ctx_fsize=$(stat -L -c %s "$ctx_file" 2>/dev/null) || ctx_fsize=0
	if [ ${#2} -gt 18 ] || [ ${#3} -gt 4 ] || [ "$3" -le 1 ] || [ "$3" -gt 4096 ] ||
		[ $(($2 + $3)) -gt "$ctx_fsize" ] ||
		[ "$(ctx_bytes "$ctx_file" $(($2 + $3 - 1)) 1)" != " 0 " ]; then
		ctx_verdict=notexec
		ctx_why="$ctx_file has an invalid PT_INTERP"
		return 0
	fi
	# The path up to its first NUL, as the kernel opens it (old: every
	# NUL dropped, and what followed the first shown as part of it), a
	# newline in it kept (swapped with NUL for head; old: cut there).
	ctx_interp=$(dd if="$ctx_file" bs=1 skip="$2" count="$3" 2>/dev/null |
		tr '\000\n' '\n\000' | head -n 1 | tr '\000' '\n')
	ctx_interp_check "$ctx_interp"
	case ${ctx_interp##*/} in
	ld-musl-*)
		ctx_verdict=musl
		ctx_why="$ctx_file is linked with musl ($ctx_interp); libctxshim.so is built for glibc"
		return 0
		;;
	esac
	ctx_inspect_secure || return 0
	ctx_verdict=ok
	ctx_why="$ctx_file is dynamically linked (interpreter $ctx_interp)"
}

# Secure-execution mode (AT_SECURE): the kernel sets it when exec changes
# the effective uid or gid away from the real one (setuid/setgid bits, see
# fs/exec.c bprm_fill_uid) or grants capabilities; glibc then ignores
# LD_PRELOAD paths with slashes.  Root running a setuid-root program is not
# secure mode.  Returns 1 (and sets the verdict) when FILE would run so.
ctx_inspect_secure() {
	if [ -u "$ctx_file" ] || [ -g "$ctx_file" ]; then
		# shellcheck disable=SC2046 # owner, group, mode string
		set -- $(stat -L -c '%u %g %A' "$ctx_file" 2>/dev/null)
		if [ $# -eq 3 ]; then
			if [ -u "$ctx_file" ] && [ "$1" != "$(id -ru)" ]; then
				ctx_verdict=secure
				ctx_why="$ctx_file is setuid (owner uid $1): the loader runs it in secure mode and ignores LD_PRELOAD"
				return 1
			fi
			case $3 in
			??????s*)
				if [ "$2" != "$(id -rg)" ]; then
					ctx_verdict=secure
					ctx_why="$ctx_file is setgid (group gid $2): the loader runs it in secure mode and ignores LD_PRELOAD"
					return 1
				fi
				;;
			esac
		fi
	fi
	if [ "$(id -ru)" != 0 ] && command -v getcap >/dev/null 2>&1 &&
		[ -n "$(getcap "$ctx_file" 2>/dev/null)" ]; then
		ctx_verdict=secure
		ctx_why="$ctx_file has file capabilities: the loader runs it in secure mode and ignores LD_PRELOAD"
		return 1
	fi
	return 0
}

# ctx_probe_lib LIB [ENTRY]: test-load LIB, on its own, into a harmless
# dynamically linked program found in PATH: true, env, cat or sh, run with
# no arguments and stdin from /dev/null; with LD_PRELOAD=ENTRY when given
# (LIB through $LIB, ctx_host_entry: this tries that expansion too), and
# LIB itself when ENTRY fails.  ctx_probe_entry is the one that loaded (the
# caller's new entry).  Not after the caller's LD_PRELOAD: the loader
# complains about an entry there that does not load (and ignores it) with
# or without LIB, and that must not count against LIB.  A statically
# linked one is skipped: it ignores LD_PRELOAD and would prove nothing.
# Only the program's standard error counts (env prints the environment on
# standard output: that is neither an error nor something to log).  Sets
# ctx_probe to the program used and ctx_why to the reason on failure, and
# returns 0 when the program exits 0 with nothing on standard error, 1 when
# it does not (ctx_why: the loader's first line), 2 when there is no
# program to test with.
ctx_probe_lib() {
	ctx_probe=
	ctx_probe_entry=${2:-$1}
	ctx_elf_machine "$1"
	ctx_host_machine=$ctx_machine
	for ctx_p in true env cat sh; do
		ctx_path_search "$ctx_p" || continue
		ctx_p=$ctx_found
		ctx_inspect "$ctx_p"
		if [ "$ctx_verdict" = ok ]; then
			ctx_probe=$ctx_p
			break
		fi
	done
	if [ -z "$ctx_probe" ]; then
		ctx_why="no dynamically linked true, env, cat or sh in PATH to test-load $1 with"
		return 2
	fi
	ctx_probe_run "$ctx_probe_entry" && return 0
	# An entry with $LIB that the test program's loader expands to another
	# directory (ctx_system_loader): the path then, if that loads.
	[ "$ctx_probe_entry" != "$1" ] || return 1
	ctx_probe_entry=$1
	ctx_probe_run "$1"
}

# ctx_probe_run ENTRY: one test run of ctx_probe_lib, with LD_PRELOAD=ENTRY.
ctx_probe_run() {
	ctx_probe_err=$(
		unset CTXSHIM_LOG CTXSHIM_EVENTS
		LD_PRELOAD=$1
		export LD_PRELOAD
		"$ctx_probe" 2>&1 >/dev/null </dev/null
	)
	ctx_probe_status=$?
	if [ $ctx_probe_status = 0 ] && [ -z "$ctx_probe_err" ]; then
		return 0
	fi
	ctx_probe_err=$(printf '%s\n' "$ctx_probe_err" | head -n 1)
	ctx_why="a test run of $ctx_probe with LD_PRELOAD=$1 ${ctx_probe_err:+printed: $ctx_probe_err}"
	[ -n "$ctx_probe_err" ] || ctx_why="$ctx_why""exited with status $ctx_probe_status"
	return 1
}
