# SPDX-License-Identifier: Apache-2.0
# The soak (tests/soak/soak.sh): minutes of programs allocating, writing,
# verifying and freeing through a small buffer while the memory famd is
# killed and restarted. SOAK_SECONDS, SOAK_PROCS tune it.
check-soak: all $(check_PROGRAMS)
	top_builddir=$(abs_top_builddir) top_srcdir=$(abs_top_srcdir) \
		$(BASH) $(srcdir)/tests/soak/soak.sh
.PHONY: check-soak
EXTRA_DIST += tests/soak/soak.sh
