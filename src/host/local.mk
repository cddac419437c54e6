# SPDX-License-Identifier: Apache-2.0
# src/host: the host role.
src_libfamdcore_la_SOURCES += \
	src/host/host.h \
	src/host/host-uffd.h \
	src/host/host-role.c \
	src/host/host-node.c \
	src/host/host-buffer.c \
	src/host/host-extent.c \
	src/host/host-fault.c \
	src/host/host-fthread.c \
	src/host/host-fork.c \
	src/host/host-grain.c \
	src/host/host-numa.c \
	src/host/host-path.c \
	src/host/host-probe.c \
	src/host/host-readahead.c \
	src/host/host-reclaim.c \
	src/host/host-replica.c \
	src/host/host-hedge.c \
	src/host/host-replace.c \
	src/host/host-ec.h \
	src/host/host-ec.c \
	src/host/host-restart.c \
	src/host/host-restart-copies.c \
	src/host/host-listen.c \
	src/host/host-session.h \
	src/host/host-session.c \
	src/host/host-session-copy.c \
	src/host/host-session-end.c \
	src/host/host-sigbus.c \
	src/host/host-uffd.c
