# SPDX-License-Identifier: Apache-2.0
# Check suites, one per module: tests/unit/check_NAME.c, linked with
# libfamdcore (everything of famd but main()) unless said otherwise.
UNIT_TESTS = \
	tests/unit/check_admin \
	tests/unit/check_cfg \
	tests/unit/check_dpu_cache \
	tests/unit/check_extent \
	tests/unit/check_host_buffer \
	tests/unit/check_host_ec \
	tests/unit/check_host_fault \
	tests/unit/check_host_hedge \
	tests/unit/check_host_path \
	tests/unit/check_host_replace \
	tests/unit/check_host_replica \
	tests/unit/check_host_restart \
	tests/unit/check_libfam \
	tests/unit/check_log \
	tests/unit/check_memory \
	tests/unit/check_proto \
	tests/unit/check_render \
	tests/unit/check_secret \
	tests/unit/check_session \
	tests/unit/check_transport \
	tests/unit/check_verbs

check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)

tests_unit_check_render_SOURCES = tests/unit/check_render.c src/ctl/famctl-render.c
# A recorded trace of a host's reads through a dpu, replayed.
tests_unit_check_dpu_cache_SOURCES = tests/unit/check_dpu_cache.c \
	tests/unit/trace-pagerank.h
# libfamd-client's API, linked as a program would.
tests_unit_check_libfam_LDADD = src/libfamd-client.la $(CHECK_LIBS) -lpthread

# Suites that run a loop, roles or programs' sessions share tests/unit/unit.c.
UNIT_HARNESS = tests/unit/unit.c tests/unit/unit.h
tests_unit_check_host_buffer_SOURCES = tests/unit/check_host_buffer.c $(UNIT_HARNESS)
tests_unit_check_host_ec_SOURCES = tests/unit/check_host_ec.c $(UNIT_HARNESS)
tests_unit_check_host_fault_SOURCES = tests/unit/check_host_fault.c $(UNIT_HARNESS)
tests_unit_check_host_hedge_SOURCES = tests/unit/check_host_hedge.c $(UNIT_HARNESS)
tests_unit_check_host_path_SOURCES = tests/unit/check_host_path.c $(UNIT_HARNESS)
tests_unit_check_host_replace_SOURCES = tests/unit/check_host_replace.c $(UNIT_HARNESS)
tests_unit_check_host_replica_SOURCES = tests/unit/check_host_replica.c $(UNIT_HARNESS)
tests_unit_check_host_restart_SOURCES = tests/unit/check_host_restart.c $(UNIT_HARNESS)
tests_unit_check_transport_SOURCES = tests/unit/check_transport.c $(UNIT_HARNESS)
tests_unit_check_verbs_SOURCES = tests/unit/check_verbs.c $(UNIT_HARNESS)
