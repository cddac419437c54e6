# SPDX-License-Identifier: Apache-2.0
# src/transport: the connection core and the tcp and verbs transports.
src_libfamdcore_la_SOURCES += \
	src/transport/transport.h \
	src/transport/transport-int.h \
	src/transport/transport.c \
	src/transport/transport-conn.c \
	src/transport/transport-msg.c \
	src/transport/transport-tcp.h \
	src/transport/transport-tcp.c \
	src/transport/transport-tcp-listen.c \
	src/transport/transport-tls.c \
	src/transport/verbs/verbs.h \
	src/transport/verbs/verbs-cm.c \
	src/transport/verbs/verbs-conn.c \
	src/transport/verbs/verbs-cq.c \
	src/transport/verbs/verbs-dev.c \
	src/transport/verbs/verbs-post.c \
	src/transport/verbs/verbs-recv.c
