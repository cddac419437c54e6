# SPDX-License-Identifier: Apache-2.0
# src/core: what every role is built on: the configuration table and
# parser, the admin socket's JSON-RPC layer, sd_notify, the shared secret.
src_libfamdcore_la_SOURCES += \
	src/core/famd.h \
	src/core/admin.c \
	src/core/cfg.c \
	src/core/cfg-redundancy.c \
	src/core/cfg-table.c \
	src/core/cpu-latency.c \
	src/core/cpu-latency.h \
	src/core/metrics.c \
	src/core/notify.c \
	src/core/secret.c
