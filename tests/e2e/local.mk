# SPDX-License-Identifier: Apache-2.0
# End-to-end tests: real famd processes on private sockets, driven by famctl
# and the programs of tests/tools (tests/e2e/lib.sh).
E2E_TESTS = \
	tests/e2e/config-check.sh \
	tests/e2e/cpu-latency.sh \
	tests/e2e/bench-swap.sh \
	tests/e2e/roles-status.sh \
	tests/e2e/metrics.sh \
	tests/e2e/reload.sh \
	tests/e2e/stop.sh \
	tests/e2e/second-famd.sh \
	tests/e2e/admin-garbage.sh \
	tests/e2e/admin-permission.sh \
	tests/e2e/admin-limits.sh \
	tests/e2e/man-lint.sh \
	tests/e2e/man-coverage.sh \
	tests/e2e/shim-exports.sh \
	tests/e2e/shim-fallback.sh \
	tests/e2e/shim-programs.sh \
	tests/e2e/shim-mappings.sh \
	tests/e2e/shim-reserve.sh \
	tests/e2e/shim-own-malloc.sh \
	tests/e2e/shim-heap.sh \
	tests/e2e/host-killed.sh \
	tests/e2e/host-restart.sh \
	tests/e2e/host-restart-redundant.sh \
	tests/e2e/host-alloc-degraded.sh \
	tests/e2e/host-famtest.sh \
	tests/e2e/host-fault-threads.sh \
	tests/e2e/host-fork.sh \
	tests/e2e/host-programs.sh \
	tests/e2e/host-grain.sh \
	tests/e2e/host-graph.sh \
	tests/e2e/host-badsession.sh \
	tests/e2e/host-memory-lost.sh \
	tests/e2e/host-memory-stalled.sh \
	tests/e2e/host-shared-file.sh \
	tests/e2e/host-striping.sh \
	tests/e2e/host-replicate.sh \
	tests/e2e/host-hedge.sh \
	tests/e2e/host-hedge-netns.sh \
	tests/e2e/host-ec.sh \
	tests/e2e/host-quorum.sh \
	tests/e2e/host-alloc-redundant.sh \
	tests/e2e/host-replace.sh \
	tests/e2e/host-readahead.sh \
	tests/e2e/host-client-exit.sh \
	tests/e2e/host-attacks.sh \
	tests/e2e/host-session-socket.sh \
	tests/e2e/host-corrupt.sh \
	tests/e2e/quota.sh \
	tests/e2e/flood.sh \
	tests/e2e/memory-rw.sh \
	tests/e2e/memory-badframes.sh \
	tests/e2e/memory-capacity.sh \
	tests/e2e/memory-preload.sh \
	tests/e2e/memory-sessions.sh \
	tests/e2e/memory-secret.sh \
	tests/e2e/memory-tls.sh \
	tests/e2e/memory-peer-keys.sh \
	tests/e2e/memory-auth.sh \
	tests/e2e/memory-preauth.sh \
	tests/e2e/memory-defaults.sh \
	tests/e2e/dpu-forward.sh \
	tests/e2e/dpu-path.sh \
	tests/e2e/dpu-aggregate.sh \
	tests/e2e/dpu-static.sh \
	tests/e2e/dpu-dynamic.sh \
	tests/e2e/dpu-adaptive.sh \
	tests/e2e/dpu-netns.sh

TESTS += $(E2E_TESTS)
EXTRA_DIST += $(E2E_TESTS) tests/e2e/lib.sh tests/e2e/lib-redundancy.sh tests/e2e/fake-peer.py \
	tests/e2e/relay.py tests/e2e/findpat.py

# The host's hardest paths again with a fault-service thread receiving the
# reads (make check-threads; in scripts/check): forks, restarts of either
# famd, a memory famd lost or stalled, programs that exit mid-read,
# read-ahead, partial chunks, corrupt data.
THREADS_TESTS = \
	tests/e2e/host-famtest.sh \
	tests/e2e/host-fork.sh \
	tests/e2e/host-restart.sh \
	tests/e2e/host-killed.sh \
	tests/e2e/host-memory-lost.sh \
	tests/e2e/host-memory-stalled.sh \
	tests/e2e/host-client-exit.sh \
	tests/e2e/host-readahead.sh \
	tests/e2e/host-grain.sh \
	tests/e2e/host-corrupt.sh \
	tests/e2e/host-graph.sh \
	tests/e2e/shim-heap.sh \
	tests/e2e/shim-own-malloc.sh
check-threads: all $(check_PROGRAMS)
	TEST_FAULT_THREADS=2 $(MAKE) $(AM_MAKEFLAGS) check TESTS="$(THREADS_TESTS)"
.PHONY: check-threads
