# SPDX-License-Identifier: Apache-2.0
# The verbs tests, in a Soft-RoCE guest booted by tests/rxe/vm/famd-rxe-vm
# (or $RXE_VM_RUN): tests/rxe/run.sh. Minutes under TCG; exit 77 (make reports
# an error) with the reason when the guest cannot run here.
RXE_TESTS = tests/rxe/verbs-transport.sh tests/rxe/verbs-memory.sh \
	tests/rxe/verbs-host.sh tests/rxe/verbs-portdown.sh tests/rxe/netem.sh \
	tests/rxe/verbs-dpu.sh tests/rxe/verbs-dpu-imm.sh \
	tests/rxe/verbs-dpu-async.sh
check-rxe: all $(check_PROGRAMS)
	top_builddir=$(abs_top_builddir) top_srcdir=$(abs_top_srcdir) \
		$(BASH) $(srcdir)/tests/rxe/run.sh $(RXE_MODES)
.PHONY: check-rxe
EXTRA_DIST += $(RXE_TESTS) tests/rxe/lib-rxe.sh tests/rxe/guest.sh \
	tests/rxe/run.sh tests/rxe/vm/famd-rxe-vm tests/rxe/vm/README.md \
	contrib/bench/rxe-fetch-bench.sh
