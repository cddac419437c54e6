# SPDX-License-Identifier: Apache-2.0
# lib-rxe.sh - shared by the tests that run inside the Soft-RoCE guest
# (tests/rxe/run.sh boots it): tests/e2e/lib.sh, plus the addresses of the
# RDMA devices and famd roles started with transport = verbs.
#
# RXE_TEST_MODE=loopback: everything on rxe0 (192.168.77.1).
# RXE_TEST_MODE=veth: servers listen on veth1's address (rxe2) and clients
# reach them from veth0's (rxe1): the traffic crosses the veth pair.

. "$top_srcdir/tests/e2e/lib.sh"

[ "${RXE_VM:-}" = 1 ] || skip "runs inside the Soft-RoCE guest (make check-rxe)"

if [ "${RXE_TEST_MODE:-loopback}" = veth ]; then
	[ -n "${RXE_VM_VETH_IP1:-}" ] || skip "the guest has no veth pair (--rxe veth)"
	SRV_IP=$RXE_VM_VETH_IP1
	SRV_DEV=$RXE_VM_VETH_DEV1
	CLI_DEV=$RXE_VM_VETH_DEV0
else
	SRV_IP=$RXE_VM_IP
	SRV_DEV=$RXE_VM_DEV
	CLI_DEV=$RXE_VM_DEV
fi
# Servers listen on addresses other nodes reach, which needs a secret:
# every famd and famclient here has the same (lib.sh's, in verbs mode).
if [ ! -e "$T/fabric.secret" ]; then
	printf 'fabric-test-secret\n' >"$T/fabric.secret"
	chmod 600 "$T/fabric.secret"
	TRANSPORT_OPTS+=(-o famd.secret_file="$T/fabric.secret")
	cat >"$T/famclient-secret" <<SH
#!/bin/sh
exec "$FAMCLIENT" -S "$T/fabric.secret" "\$@"
SH
	chmod 755 "$T/famclient-secret"
	FAMCLIENT=$T/famclient-secret
fi
FAMTEST=$top_builddir/tests/tools/famtest
FAMLOST=$top_builddir/tests/tools/famlost
export FAM_TEST_VERBS_ADDR=$SRV_IP

# start_memory_verbs NAME [famd options...]: a memory famd with transport =
# verbs on $SRV_IP, any port; sets MEM_ADDR and MEM_PID.
start_memory_verbs() {
	local name=$1
	shift
	start_memory "$name" -o famd.transport=verbs \
		-o memory.listen="$SRV_IP:0" -o memory.capacity=2G "$@"
}

# start_host_verbs NAME BUFFER NODES [famd options...]: a host famd with
# transport = verbs.
start_host_verbs() {
	local name=$1 buffer=$2 nodes=$3
	shift 3
	start_host "$name" "$buffer" "$nodes" -o famd.transport=verbs \
		-o famd.op_timeout=10s "$@"
}

# fc ARGS...: famclient over verbs.
fc() {
	"$FAMCLIENT" -T verbs "$@"
}

# rxe_counter DEV NAME: one of an rxe device's hardware counters.
rxe_counter() {
	cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2" 2>/dev/null || echo 0
}
