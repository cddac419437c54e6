#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# usage: xzexp.sh CHUNK BUFFER PREFETCH
. "$(dirname "$0")/lib.sh"
start_memory mem
cat >"$T/h.conf" <<CONF
[famd]
role = host
[host]
memory_nodes = $MEM_ADDR
buffer_size = $2
chunk_size = $1
prefetch = $3
session_socket = $T/h.session
CONF
start_famd h "$T/h.conf"
export FAM_SOCKET=$T/h.session
wait_until 10 host_nodes_up h
seq 1 4000000 | awk '{ print $1 * 7919 % 1000003, "line", $1 }' | head -c 3M >"$T/text"
s=$(date +%s.%N)
timeout 300 env LD_PRELOAD=$top_builddir/src/.libs/libfamshim.so sh -c "xz -9 -T1 -c '$T/text' | md5sum" || echo TIMEOUT
e=$(date +%s.%N)
echo "chunk $1 buffer $2 prefetch $3: $(echo "$e - $s" | bc) s moved $(ctl h status -j | jq '.counters | .ondemand_bytes + .background_read_bytes + .background_write_bytes' | awk '{print int($1/1048576)}') MiB faults $(ctl h status -j | jq .counters.faults_missing)"
