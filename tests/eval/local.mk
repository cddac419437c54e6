# SPDX-License-Identifier: Apache-2.0
# The evaluation, short (tests/eval/eval-quick.sh): contrib/eval/run-eval
# --quick on the emulated testbed, every configuration; needs root (77
# otherwise). About a minute or two.
check-eval: all $(check_PROGRAMS)
	top_builddir=$(abs_top_builddir) top_srcdir=$(abs_top_srcdir) \
		$(BASH) $(srcdir)/tests/eval/eval-quick.sh
.PHONY: check-eval
EXTRA_DIST += tests/eval/eval-quick.sh
