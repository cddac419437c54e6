# src/client: the programs' side: libfam (the API, the session, arenas)
# and libfamshim (the LD_PRELOAD malloc). Compiled apart from famd: no
# stdio on the allocation path, nothing of famd's but src/wire/session.c.

include_HEADERS = include/fam.h
lib_LTLIBRARIES = src/libfam.la src/libfamshim.la
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = src/client/libfam.pc

# Both never unload (a watchdog thread may run their code) and bind at load
# time (no lazy binding inside malloc).
FAMLIB_LDFLAGS = -Wl,-z,nodelete -Wl,-z,now -pthread

# libfam.so: the fam.h API, the client side of src/wire/session.h.
LIBFAM_SOURCES = src/client/libfam-api.c src/client/libfam-session.c \
	src/client/libfam-arena.c src/client/libfam-internal.h \
	src/wire/session.h src/wire/session.c
src_libfam_la_SOURCES = $(LIBFAM_SOURCES)
src_libfam_la_CFLAGS = $(AM_CFLAGS) -pthread
src_libfam_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 $(FAMLIB_LDFLAGS) \
	-Wl,--version-script=$(srcdir)/src/client/libfam.sym
EXTRA_src_libfam_la_DEPENDENCIES = src/client/libfam.sym

# libfamshim.so: the LD_PRELOAD malloc, with libfam compiled in so that it
# works alone. Never sanitized: a sanitizer runtime cannot be preloaded
# behind another malloc.
src_libfamshim_la_SOURCES = src/client/shim.c $(LIBFAM_SOURCES)
src_libfamshim_la_CFLAGS = -std=gnu11 $(WARN_CFLAGS) -fvisibility=hidden \
	-fno-builtin -pthread
src_libfamshim_la_LDFLAGS = -module -avoid-version -shared $(FAMLIB_LDFLAGS) \
	-Wl,--version-script=$(srcdir)/src/client/shim.sym
EXTRA_src_libfamshim_la_DEPENDENCIES = src/client/shim.sym

EXTRA_DIST += src/client/libfam.sym src/client/shim.sym src/client/libfam.pc.in
