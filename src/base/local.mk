# SPDX-License-Identifier: Apache-2.0
# src/base: logging, exit codes, small utilities. Depends on nothing of famd's.
src_libfamdcore_la_SOURCES += \
	src/base/base.h \
	src/base/log.c \
	src/base/util.c
