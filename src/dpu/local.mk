# src/dpu: the dpu role.
src_libfamdcore_la_SOURCES += \
	src/dpu/dpu.h \
	src/dpu/dpu-role.c \
	src/dpu/dpu-forward.c \
	src/dpu/dpu-cache.c
