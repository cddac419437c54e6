# SPDX-License-Identifier: Apache-2.0
# src/dpu: the dpu role (README.md: its files, top down).
src_libfamdcore_la_SOURCES += \
	src/dpu/dpu.h \
	src/dpu/dpu-role.c \
	src/dpu/dpu-host.h \
	src/dpu/dpu-host.c \
	src/dpu/dpu-forward.h \
	src/dpu/dpu-forward.c \
	src/dpu/dpu-cache.h \
	src/dpu/dpu-cache.c \
	src/dpu/dpu-cache-static.c \
	src/dpu/dpu-cache-dynamic.c \
	src/dpu/dpu-cache-prefetch.c \
	src/dpu/dpu-staging.h \
	src/dpu/dpu-staging.c \
	src/dpu/dpu-memlink.h \
	src/dpu/dpu-memlink.c
