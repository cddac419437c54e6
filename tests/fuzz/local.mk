# SPDX-License-Identifier: Apache-2.0
# libFuzzer targets (configure --enable-fuzzing, with clang):
# tests/fuzz/README.md. They link libfamdfuzz, the sources of libfamdcore
# built with the fuzzing flags; the rest of the build does not change.
FUZZ_TARGETS = tests/fuzz/fuzz-proto tests/fuzz/fuzz-memory \
	tests/fuzz/fuzz-dpu tests/fuzz/fuzz-client tests/fuzz/fuzz-admin \
	tests/fuzz/fuzz-config tests/fuzz/fuzz-session
FUZZ_TARGET_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
# Seconds each target runs in make fuzz-short, and targets run at once
# (empty: one per core).
FUZZ_SECONDS = 45
FUZZ_JOBS =

if FUZZING
noinst_LTLIBRARIES += tests/fuzz/libfamdfuzz.la
noinst_PROGRAMS += $(FUZZ_TARGETS) tests/fuzz/fuzz-seeds
endif

tests_fuzz_libfamdfuzz_la_SOURCES = $(src_libfamdcore_la_SOURCES)
tests_fuzz_libfamdfuzz_la_CFLAGS = $(FUZZ_TARGET_CFLAGS)

FUZZ_LDADD = tests/fuzz/libfamdfuzz.la $(DEP_LIBS)
tests_fuzz_fuzz_proto_SOURCES = tests/fuzz/fuzz-proto.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_config_SOURCES = tests/fuzz/fuzz-config.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_session_SOURCES = tests/fuzz/fuzz-session.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_admin_SOURCES = tests/fuzz/fuzz-admin.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_client_SOURCES = tests/fuzz/fuzz-client.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_memory_SOURCES = tests/fuzz/fuzz-memory.c tests/fuzz/fuzz.h \
	tests/fuzz/fuzz-net.c tests/fuzz/fuzz-net.h
tests_fuzz_fuzz_dpu_SOURCES = tests/fuzz/fuzz-dpu.c tests/fuzz/fuzz.h \
	tests/fuzz/fuzz-net.c tests/fuzz/fuzz-net.h
tests_fuzz_fuzz_proto_CFLAGS = $(FUZZ_TARGET_CFLAGS)
tests_fuzz_fuzz_config_CFLAGS = $(FUZZ_TARGET_CFLAGS)
tests_fuzz_fuzz_session_CFLAGS = $(FUZZ_TARGET_CFLAGS)
tests_fuzz_fuzz_admin_CFLAGS = $(FUZZ_TARGET_CFLAGS)
tests_fuzz_fuzz_client_CFLAGS = $(FUZZ_TARGET_CFLAGS)
tests_fuzz_fuzz_memory_CFLAGS = $(FUZZ_TARGET_CFLAGS)
tests_fuzz_fuzz_dpu_CFLAGS = $(FUZZ_TARGET_CFLAGS)
tests_fuzz_fuzz_proto_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_fuzz_config_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_fuzz_session_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_fuzz_admin_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_fuzz_client_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_fuzz_memory_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_fuzz_dpu_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_fuzz_proto_LDADD = $(FUZZ_LDADD)
tests_fuzz_fuzz_config_LDADD = $(FUZZ_LDADD)
tests_fuzz_fuzz_session_LDADD = $(FUZZ_LDADD)
tests_fuzz_fuzz_admin_LDADD = $(FUZZ_LDADD)
tests_fuzz_fuzz_client_LDADD = $(FUZZ_LDADD)
tests_fuzz_fuzz_memory_LDADD = $(FUZZ_LDADD)
tests_fuzz_fuzz_dpu_LDADD = $(FUZZ_LDADD)

# Writes the seed corpora and the configuration dictionary into the source
# tree from famd's encoders and key table (after a protocol change).
tests_fuzz_fuzz_seeds_LDADD = src/libfamdcore.la $(DEP_LIBS)

fuzz-seeds: tests/fuzz/fuzz-seeds$(EXEEXT)
	$(MKDIR_P) $(srcdir)/tests/fuzz/corpus $(srcdir)/tests/fuzz/dict
	tests/fuzz/fuzz-seeds$(EXEEXT) $(srcdir)/tests/fuzz
.PHONY: fuzz-seeds

# Runs every target for FUZZ_SECONDS from its seed corpus, FUZZ_JOBS at a
# time (new inputs go to tests/fuzz/work/, never to the source tree); fails
# on any crash, leak, sanitizer report or broken assertion, keeping the
# input in tests/fuzz/artifacts/.
fuzz-short:
if FUZZING
	@$(MAKE) $(AM_MAKEFLAGS) $(FUZZ_TARGETS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) \
		top_builddir=$(abs_top_builddir) \
		top_srcdir=$(abs_top_srcdir) $(BASH) $(srcdir)/tests/fuzz/run.sh \
		$(FUZZ_TARGETS)
else
	@echo "fuzz-short: configure with --enable-fuzzing (tests/fuzz/README.md)" >&2; exit 1
endif
.PHONY: fuzz-short

clean-local:
	rm -rf tests/fuzz/work tests/fuzz/artifacts tests/fuzz/*.log tests/fuzz/*.result

EXTRA_DIST += tests/fuzz/README.md tests/fuzz/run.sh tests/fuzz/coverage.sh \
	tests/fuzz/corpus tests/fuzz/dict
