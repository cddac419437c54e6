# SPDX-License-Identifier: Apache-2.0
# The compatibility suite (make check-compat; in scripts/check): programs
# from Debian's packages that nobody here wrote, each run on local memory
# and under libfamshim.so with a host buffer a third of its footprint; same
# output, its memory held by famd (tests/compat/lib-compat.sh). Minutes.
COMPAT_TESTS = \
	tests/compat/diff.sh \
	tests/compat/gcc.sh \
	tests/compat/imagemagick.sh \
	tests/compat/java.sh \
	tests/compat/node.sh \
	tests/compat/numpy.sh \
	tests/compat/perl.sh \
	tests/compat/python-fork.sh \
	tests/compat/redis.sh \
	tests/compat/sort.sh \
	tests/compat/sqlite3.sh \
	tests/compat/sqlite3-rand.sh \
	tests/compat/xz.sh

# What does not work yet, each for its reason (they fail as they should
# until it is fixed, and an XPASS fails the suite so the list is kept
# true): nothing today.
COMPAT_XFAIL =

check-compat: all $(check_PROGRAMS)
	rm -f tests/compat/results.tsv
	$(MAKE) $(AM_MAKEFLAGS) check TESTS="$(COMPAT_TESTS)" \
		XFAIL_TESTS="$(COMPAT_XFAIL)"
	@echo "program	footprint	buffer	local	famd	held by famd	moved	resident under famd"
	@cat tests/compat/results.tsv 2>/dev/null || true
.PHONY: check-compat
EXTRA_DIST += $(COMPAT_TESTS) tests/compat/lib-compat.sh
