# src/memory: the memory role.
src_libfamdcore_la_SOURCES += \
	src/memory/memory-role.c
