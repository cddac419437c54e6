# src/transport: the connection core and the tcp and verbs transports.
src_libfamdcore_la_SOURCES += \
	src/transport/transport.h \
	src/transport/transport-int.h \
	src/transport/transport.c \
	src/transport/transport-tcp.c \
	src/transport/transport-verbs.c
