# SPDX-License-Identifier: Apache-2.0
# src/wire: the node protocol (famd to famd), the session protocol
# (program to host famd) and descriptor passing. Both ends compile them.
src_libfamdcore_la_SOURCES += \
	src/wire/proto.h \
	src/wire/proto.c \
	src/wire/proto-auth.c \
	src/wire/proto-crc.c \
	src/wire/session.h \
	src/wire/session.c \
	src/wire/fdpass.h \
	src/wire/fdpass.c
