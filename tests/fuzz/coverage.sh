#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# coverage.sh - line and branch coverage of famd's sources by the fuzz
# corpora: replays each target's seeds and the inputs a run found, in a
# build configured with clang's source coverage (tests/fuzz/README.md, "Coverage
# by line"), and prints llvm-cov's report of the famd files it drives.
#
# usage: tests/fuzz/coverage.sh COV-BUILD-DIR [FUZZ-BUILD-DIR] [NAME...]
#   COV-BUILD-DIR   built with --enable-fuzzing and
#                   CFLAGS="-O1 -fprofile-instr-generate -fcoverage-mapping"
#   FUZZ-BUILD-DIR  whose tests/fuzz/work/NAME holds a run's inputs (optional)
#   NAME            proto, memory, dpu, client, admin, config, session
#                   (default: all)
set -u
top_srcdir=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n '2,/^set/p' "$0" | sed '$d'; exit 2; }
cov=$(cd "$1" && pwd) || exit 2
shift
work=
if [ $# -ge 1 ] && [ -d "$1/fuzz" ]; then
	work=$(cd "$1" && pwd)/tests/fuzz/work
	shift
fi
[ $# -ge 1 ] || set -- proto memory dpu client admin config session

profdata=$(command -v llvm-profdata || command -v llvm-profdata-14)
llvmcov=$(command -v llvm-cov || command -v llvm-cov-14)
[ -n "$profdata" ] && [ -n "$llvmcov" ] || {
	echo "coverage.sh: llvm-profdata and llvm-cov not found (Debian: llvm)" >&2
	exit 1
}

# sources NAME: the famd files a target drives.
sources() {
	case $1 in
	proto) echo src/wire/proto.c ;;
	memory) echo src/transport/transport-tcp.c src/transport/transport-conn.c src/transport/transport-msg.c src/transport/transport.c src/wire/proto.c src/memory/memory-region.c src/memory/memory-session.c src/memory/memory-serve.c src/memory/memory-role.c ;;
	dpu) echo src/transport/transport-tcp.c src/transport/transport-conn.c src/transport/transport-msg.c src/dpu/dpu-role.c src/dpu/dpu-host.c src/dpu/dpu-forward.c src/dpu/dpu-cache.c src/dpu/dpu-cache-static.c src/dpu/dpu-cache-dynamic.c src/dpu/dpu-staging.c src/dpu/dpu-memlink.c ;;
	client) echo src/transport/transport-tcp.c src/transport/transport-conn.c src/transport/transport-msg.c src/transport/transport.c src/wire/proto.c ;;
	admin) echo src/core/admin.c src/daemon/admin-cmds.c src/daemon/control.c ;;
	config) echo src/core/cfg.c ;;
	session) echo src/wire/session.c src/host/host-extent.c ;;
	esac
}

cd "$cov" || exit 1
status=0
for name in "$@"; do
	dirs=("$top_srcdir/tests/fuzz/corpus/$name")
	if [ -n "$work" ] && [ -d "$work/$name" ]; then
		dirs=("$work/$name" "${dirs[@]}")
	fi
	rm -f "fuzz-$name".profraw
	LLVM_PROFILE_FILE="fuzz-$name.profraw" "tests/fuzz/fuzz-$name" -runs=0 \
		-close_fd_mask=2 "${dirs[@]}" >"fuzz-$name.replay.log" 2>&1 || {
		echo "coverage.sh: fuzz-$name failed replaying its corpus; see $cov/fuzz-$name.replay.log" >&2
		status=1
		continue
	}
	"$profdata" merge -o "fuzz-$name.profdata" "fuzz-$name.profraw" || { status=1; continue; }
	echo "==== fuzz-$name ($(grep -o 'corp: [0-9]*' "fuzz-$name.replay.log" | tail -n 1 | cut -d' ' -f2) inputs)"
	"$llvmcov" report "tests/fuzz/fuzz-$name" -instr-profile="fuzz-$name.profdata" |
		awk -v want=" $(sources "$name") " '
		{ f = $1; sub(/^.*\/src\//, "src/", f) }
		NF == 13 && index(want, " " f " ") {
			printf "  %-22s lines %5d of %-5d %8s   branches %8s\n",
			    f, $8 - $9, $8, $10, $13
			lines += $8; missed += $9
		}
		END { if (lines > 0) printf "  %-22s lines %5d of %-5d %7.2f%%\n",
			    "together", lines - missed, lines,
			    100 * (lines - missed) / lines }'
done
exit $status
