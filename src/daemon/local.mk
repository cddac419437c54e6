# SPDX-License-Identifier: Apache-2.0
# src/daemon: famd's main(), what admin commands and signals ask of the
# running daemon, the commands every role has; famd-confgen, the build tool
# that writes the example configurations and famd.conf(5) from the key table.
src_libfamdcore_la_SOURCES += \
	src/daemon/control.c \
	src/daemon/admin-cmds.c \
	src/daemon/metrics-http.c

sbin_PROGRAMS += src/famd
src_famd_SOURCES = src/daemon/famd.c
src_famd_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
src_famd_LDADD = src/libfamdcore.la $(DEP_LIBS)

noinst_PROGRAMS += src/famd-confgen
src_famd_confgen_SOURCES = src/daemon/confgen.c
src_famd_confgen_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
src_famd_confgen_LDADD = src/libfamdcore.la $(DEP_LIBS)
