# SPDX-License-Identifier: Apache-2.0
# Programs the end-to-end tests run: famtest and friends under
# LD_PRELOAD=libfamshim.so, famclient (a client of a memory famd that also
# sends malformed frames on purpose), famsess (a raw session client).
TEST_TOOLS = tests/shim/shimtest tests/tools/famtest tests/tools/famlost \
	tests/tools/famhold tests/tools/famsoak tests/tools/famclient \
	tests/tools/famsess tests/tools/famfile tests/tools/fammap \
	tests/tools/famheap tests/tools/famred tests/tools/famownalloc
check_PROGRAMS += $(TEST_TOOLS)

# Preloaded programs cannot be sanitized: no sanitizer flags, nothing of
# famd's linked in.
PRELOADED_CFLAGS = -std=gnu11 $(WARN_CFLAGS) -pthread
TOOLUTIL = tests/tools/toolutil.c tests/tools/toolutil.h
tests_tools_famtest_SOURCES = tests/tools/famtest.c $(TOOLUTIL)
tests_tools_famlost_SOURCES = tests/tools/famlost.c $(TOOLUTIL)
tests_tools_famhold_SOURCES = tests/tools/famhold.c $(TOOLUTIL)
tests_tools_famsoak_SOURCES = tests/tools/famsoak.c $(TOOLUTIL)
tests_tools_famheap_SOURCES = tests/tools/famheap.c $(TOOLUTIL)
tests_tools_famfile_SOURCES = tests/tools/famfile.c $(TOOLUTIL)
tests_tools_fammap_SOURCES = tests/tools/fammap.c $(TOOLUTIL)
tests_shim_shimtest_CFLAGS = $(PRELOADED_CFLAGS)
tests_shim_shimtest_LDFLAGS = -pthread
tests_shim_shimtest_LDADD =
tests_tools_famtest_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_famtest_LDFLAGS = -pthread
tests_tools_famtest_LDADD =
tests_tools_famlost_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_famlost_LDFLAGS = -pthread
tests_tools_famlost_LDADD =
tests_tools_famhold_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_famhold_LDFLAGS = -pthread
tests_tools_famhold_LDADD =
tests_tools_famsoak_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_famsoak_LDFLAGS = -pthread
tests_tools_famsoak_LDADD =
tests_tools_fammap_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_fammap_LDFLAGS = -pthread
tests_tools_fammap_LDADD =
tests_tools_famheap_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_famheap_LDFLAGS = -pthread
tests_tools_famheap_LDADD =
# Its own malloc, exported ahead of the shim's (-rdynamic).
tests_tools_famownalloc_SOURCES = tests/tools/famownalloc.c $(TOOLUTIL)
tests_tools_famownalloc_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_famownalloc_LDFLAGS = -pthread -rdynamic
tests_tools_famownalloc_LDADD =
# Speaks the session protocol's structures by hand (bad messages).
tests_tools_famsess_LDADD =
# Linked with libfamd-client.so, which an ASan build sanitizes like check_libfam:
# the program must carry the sanitizer too (it is not preloaded).
tests_tools_famfile_CFLAGS = $(AM_CFLAGS) -pthread
tests_tools_famfile_LDADD = src/libfamd-client.la -lpthread
tests_tools_famred_SOURCES = tests/tools/famred.c $(TOOLUTIL)
tests_tools_famred_CFLAGS = $(AM_CFLAGS)
tests_tools_famred_LDADD = src/libfamd-client.la
# Preloaded after the shim: a constructor that allocates before the
# shim's runs (a shared module, built for the tests only).
check_LTLIBRARIES = tests/tools/libfamearly.la
tests_tools_libfamearly_la_SOURCES = tests/tools/famearly.c
tests_tools_libfamearly_la_CFLAGS = $(PRELOADED_CFLAGS)
tests_tools_libfamearly_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere
tests_tools_libfamearly_la_LIBADD =
