# SPDX-License-Identifier: Apache-2.0
# Workloads and benchmarks: plain programs that know nothing of famd (their
# memory comes from malloc, so under libfamshim.so it is fabric-attached);
# never sanitized, since they run under the shim.
noinst_PROGRAMS += contrib/graph/graph contrib/graph/graph-fam \
	contrib/bench/faultbench contrib/bench/fetchbench contrib/bench/evictbench \
	contrib/bench/bfsreuse

GRAPH_SOURCES = contrib/graph/graph.c contrib/graph/graph.h \
	contrib/graph/graph-apps.c contrib/graph/graph-gen.c contrib/graph/graph-io.c
contrib_graph_graph_SOURCES = $(GRAPH_SOURCES)
contrib_graph_graph_CFLAGS = -std=gnu11 -O2 $(WARN_CFLAGS) $(OPENMP_CFLAGS)
contrib_graph_graph_LDFLAGS = $(OPENMP_CFLAGS)
contrib_graph_graph_LDADD =
# graph-fam: the same program linked with libfamd-client, which can map a
# graph preloaded on the memory node (-F); not preloaded, so sanitized like
# libfamd-client.
contrib_graph_graph_fam_SOURCES = $(GRAPH_SOURCES)
contrib_graph_graph_fam_CPPFLAGS = $(AM_CPPFLAGS) -DGRAPH_FAM
contrib_graph_graph_fam_CFLAGS = $(AM_CFLAGS) -O2 $(OPENMP_CFLAGS)
contrib_graph_graph_fam_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
contrib_graph_graph_fam_LDADD = src/libfamd-client.la
contrib_bench_faultbench_CFLAGS = -std=gnu11 -O2 $(WARN_CFLAGS) -pthread
contrib_bench_faultbench_LDFLAGS = -pthread
contrib_bench_faultbench_LDADD =
# evictbench: the kernel's cost of installing and evicting a chunk, each
# way famd can (host.install; punch, MADV_REMOVE, batched punch).
contrib_bench_evictbench_CFLAGS = -std=gnu11 -O2 $(WARN_CFLAGS)
contrib_bench_evictbench_LDADD =
# bfsreuse: BFS's accesses replayed, the distinct data of each step and the
# misses of an LRU and of Belady's optimum over them (src/host/README.md).
contrib_bench_bfsreuse_CFLAGS = -std=gnu11 -O2 $(WARN_CFLAGS)
contrib_bench_bfsreuse_LDADD =
# fetchbench: the transport's chunk fetch (contrib/bench/rxe-fetch-bench.sh
# runs it in the guest).
contrib_bench_fetchbench_LDADD = src/libfamdcore.la $(DEP_LIBS)

EXTRA_DIST += contrib/bench/famd-bench contrib/bench/swap-baseline.sh contrib/bench/dpu-bench \
	contrib/bench/redundancy-bench \
	contrib/graph/README.md contrib/eval/run-eval contrib/eval/testbed.sh \
	contrib/eval/report
