# SPDX-License-Identifier: Apache-2.0
# src/ctl: famctl, the admin socket's client.
bin_PROGRAMS += src/famctl
src_famctl_SOURCES = src/ctl/famctl.c src/ctl/famctl.h src/ctl/famctl-render.c
src_famctl_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
src_famctl_LDADD = src/libfamdcore.la $(DEP_LIBS)
