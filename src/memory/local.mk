# SPDX-License-Identifier: Apache-2.0
# src/memory: the memory role.
src_libfamdcore_la_SOURCES += \
	src/memory/memory.h \
	src/memory/memory-region.c \
	src/memory/memory-role.c \
	src/memory/memory-serve.c \
	src/memory/memory-session.c
