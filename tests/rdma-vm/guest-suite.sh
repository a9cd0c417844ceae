#!/bin/sh
# Runs inside the rdma-vm guest (soft-RoCE rxe0 on a dummy netdev): every data-path test
# that has an rdma variant, over real verbs. Usage: guest-suite.sh BUILD_DIR
# Exit: 0 all passed, 1 something failed, 77 no RDMA device came up.
build=$1
if ! ibv_devices 2>/dev/null | grep -q rxe; then
	# Without a device every test below would skip: say so, as a skip.
	echo "SKIP: no rxe device in the guest" >&2
	exit 77
fi
passed=0
failed=0
run() {
	name=$1
	shift
	echo "=== rdma-vm: $name"
	start=$(date +%s)
	if "$@"; then
		passed=$((passed + 1))
		echo "=== rdma-vm: $name passed ($(( $(date +%s) - start )) s)"
	else
		failed=$((failed + 1))
		echo "=== rdma-vm: $name FAILED ($(( $(date +%s) - start )) s)"
	fi
	# What a list left behind: a later list slowed by a full tmpfs or by
	# memory pressure shows here, not in its own output.
	echo "=== rdma-vm: after $name: /tmp $(du -sm /tmp 2>/dev/null | cut -f1) MiB," \
		"$(awk '/^MemAvailable/ {print int($2 / 1024)}' /proc/meminfo) MiB available," \
		"load $(cut -d' ' -f1-3 /proc/loadavg), $(ps -e --no-headers 2>/dev/null | wc -l) processes"
}
# rdma_cm cannot route a loopback address over rxe: use the guest's RDMA interface.
export RDMAFS_TEST_ADDR=${RDMAFS_VM_RDMA_ADDR:-127.0.0.1}
export RDMAFS_TEST_DEV=${RDMAFS_VM_RDMA_DEV:-rxe0}
run conformance-rdma "$build/tests/transport/conformance" rdma
for extra in "$build"/tests/rdma-vm/guest.d/*; do
	[ -f "$extra" ] && run "$(basename "$extra")" sh "$extra" "$build"
done
echo "rdma-vm: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
