# SPDX-License-Identifier: Apache-2.0
# src/client: the programs' side: libfamd-client (libfam-*.c: the API, the
# session, arenas) and libfamshim (the LD_PRELOAD malloc). Compiled apart
# from famd: no stdio on the allocation path, nothing of famd's but
# src/wire/session.c.

# The header has a directory of its own: <famd-client/famd-client.h>.
famdclientincludedir = $(includedir)/famd-client
famdclientinclude_HEADERS = include/famd-client/famd-client.h
lib_LTLIBRARIES = src/libfamd-client.la src/libfamshim.la
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = src/client/famd-client.pc

# Both never unload (a watchdog thread may run their code) and bind at load
# time (no lazy binding inside malloc).
FAMLIB_LDFLAGS = -Wl,-z,nodelete -Wl,-z,now -pthread

# libfamd-client.so.0: the famd-client.h API, the client side of
# src/wire/session.h.
LIBFAM_SOURCES = src/client/libfam-api.c src/client/libfam-session.c \
	src/client/libfam-fork.c src/client/libfam-arena.c \
	src/client/libfam-restart.c \
	src/client/libfam-internal.h \
	src/wire/session.h src/wire/session.c src/wire/fdpass.h src/wire/fdpass.c
src_libfamd_client_la_SOURCES = $(LIBFAM_SOURCES)
src_libfamd_client_la_CFLAGS = $(AM_CFLAGS) -pthread
src_libfamd_client_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 \
	$(FAMLIB_LDFLAGS) 	-Wl,--version-script=$(srcdir)/src/client/libfamd-client.sym
EXTRA_src_libfamd_client_la_DEPENDENCIES = src/client/libfamd-client.sym

# libfamshim.so: the LD_PRELOAD malloc, with libfam compiled in so that it
# works alone. Never sanitized: a sanitizer runtime cannot be preloaded
# behind another malloc.
# FAM_HEAP=all puts the small requests in jemalloc (libjemalloc-dev),
# called through mallocx() and friends. It is linked in, hidden, from
# Debian's PIC archive with the malloc names it defines made local: linked
# as libjemalloc.so.2, it would bring libstdc++ into every program and put
# its operator new, which then binds before libstdc++'s, between a C
# program's C++ libraries and the shim. Its constructor (its only
# .init_array entry) is dropped: jemalloc then sets itself up on first use,
# so that programs without FAM_HEAP=all do not pay for it (1.4 MiB
# resident).
JEMALLOC_LOCAL = -L malloc -L calloc -L realloc -L free -L posix_memalign \
	-L aligned_alloc -L memalign -L valloc -L malloc_usable_size \
	-R .init_array
src/client/libfamshim-jemalloc.a: $(JEMALLOC_PIC)
	$(AM_V_GEN)$(OBJCOPY) $(JEMALLOC_LOCAL) $(JEMALLOC_PIC) $@ && \
		$(RANLIB) $@
MOSTLYCLEANFILES = src/client/libfamshim-jemalloc.a
src_libfamshim_la_SOURCES = src/client/shim.c src/client/shim-map.c \
	src/client/shim.h src/client/shim-heap.c src/client/shim-heap.h \
	$(LIBFAM_SOURCES)
src_libfamshim_la_CFLAGS = -std=gnu11 $(WARN_CFLAGS) -fvisibility=hidden \
	-fno-builtin -pthread $(JEMALLOC_CFLAGS)
src_libfamshim_la_LDFLAGS = -module -avoid-version -shared $(FAMLIB_LDFLAGS) \
	-static-libgcc -Wl,--version-script=$(srcdir)/src/client/shim.sym
src_libfamshim_la_LIBADD = src/client/libfamshim-jemalloc.a -lm -ldl
EXTRA_src_libfamshim_la_DEPENDENCIES = src/client/shim.sym \
	src/client/libfamshim-jemalloc.a

EXTRA_DIST += src/client/libfamd-client.sym src/client/shim.sym \
	src/client/famd-client.pc.in
