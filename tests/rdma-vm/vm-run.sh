#!/usr/bin/env bash
# Run one command over real RDMA verbs (soft-RoCE, rdma_rxe) inside a QEMU guest.
#
# Usage: tests/rdma-vm/vm-run.sh [--cache DIR] [--timeout SECS] [--verbose] [--] COMMAND [ARGS...]
#
# Why: the machines that build rdmafs have no RDMA NIC and their running kernel
# has no RDMA support, so the verbs backend could never be tested for real.
# Debian's own kernel has rdma_rxe, which turns any netdev (here lo) into a
# RoCE device, so we boot that kernel in QEMU (TCG; no KVM needed) with the
# host's root shared read-only over 9p and run COMMAND chrooted into it: binaries
# built on the host run unchanged against a real kernel verbs stack.
# See the section "Testing real RDMA on a machine without an RDMA NIC" in
# DESIGN.md.
#
# How:
#   1. Once, cached in DIR (default ${RDMAFS_VM_CACHE:-/var/cache/rdmafs-vm}):
#      download the kernel package that linux-image-amd64 depends on (not
#      installed: only unpacked), and build a busybox initramfs holding
#      tests/rdma-vm/init.sh as /init plus the modules it needs.  The cache key
#      hashes this script, init.sh, the kernel package version and the busybox
#      version, so any change rebuilds.
#   2. Write a job script (environment, working directory, COMMAND) into a
#      fresh results directory shared read-write with the guest.
#   3. Boot QEMU.  The guest's init loads the modules, creates the soft-RoCE
#      device, chroots into the host root, runs the job with stdout/stderr
#      wired to ours through virtio-serial ports, writes the exit status to the
#      results share and powers off.
#
# Inside the guest: one RDMA device, rxe0, on a dummy netdev with address
# 192.0.2.1; use that address for rdma_cm (RDMAFS_VM_RDMA_ADDR has it,
# RDMAFS_VM_RDMA_DEV the device name).  127.0.0.1 does NOT work with rdma_cm
# on rxe (rdma_resolve_route: ENODEV), so tests must not use it for verbs.
# RDMAFS_IN_VM=1; / is the host's root, read-only; /tmp, /var/tmp, /root,
# /run and /dev/shm are fresh tmpfs; if the working directory is under one of
# the first three it is made visible (read-only) at the same path; /dev/fd,
# /dev/std{in,out,err}, cgroup2 and fusectl are there as on a host booted by
# systemd; memlock is unlimited and 65536 files may be open; the
# command runs as root with stdin from /dev/null.  Passed through from the
# caller's environment: PATH, HOME, LANG, LANGUAGE, LD_LIBRARY_PATH, LD_PRELOAD,
# and every variable whose name starts with RDMAFS_, MESON_, ASAN_, UBSAN_,
# LSAN_, TSAN_, MSAN_, MALLOC_ (meson sets MALLOC_PERTURB_) or LC_.
#
# Exit status: COMMAND's status (0 pass, 77 skip, other fail).  77 with a one
# line reason on stderr if the VM cannot run here at all (no QEMU and no way
# to install it, kernel package not downloadable).  1 with the console tail if
# the guest produced no status (boot failure, crash, --timeout).
#
# Tunables (environment): RDMAFS_VM_CACHE (cache dir), RDMAFS_VM_MEMORY (QEMU
# -m, default 2G), RDMAFS_VM_CPUS (QEMU -smp, default 2).

set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
SELF=$SCRIPT_DIR/$(basename -- "${BASH_SOURCE[0]}")
readonly SCRIPT_DIR SELF
readonly INIT_SCRIPT=$SCRIPT_DIR/init.sh

# Automake/meson convention: 77 means "skipped".
readonly EXIT_SKIP=77
readonly EXIT_FAIL=1
# Status 124 is what timeout(1) returns when it had to stop its command.
readonly EXIT_TIMEOUT=124
# Hard limit for one guest run.  Booting takes ~15 s under TCG; the rest is
# for slow test suites, which run 10-50x slower than natively under TCG.
readonly DEFAULT_TIMEOUT=1500
# After the timeout's SIGTERM, give QEMU this long before SIGKILL.
readonly KILL_GRACE=10
# How much of the serial console to show when the guest fails.
readonly CONSOLE_TAIL_LINES=40
# RDMA pins memory and the tests run whole daemons: 2 GiB leaves room.
readonly GUEST_MEMORY=${RDMAFS_VM_MEMORY:-2G}
# One vCPU per host core on the 2-core build machines (TCG is multi-threaded).
readonly GUEST_CPUS=${RDMAFS_VM_CPUS:-2}
# The metapackage that always points at Debian's current kernel.
readonly KERNEL_METAPACKAGE=linux-image-amd64
# The guest's RDMA setup (init.sh creates it; the job gets the device and
# address as RDMAFS_VM_RDMA_DEV and RDMAFS_VM_RDMA_ADDR).  rxe sits on a dummy
# netdev because rdma_cm cannot use rxe on lo (see init.sh).  The address is
# from TEST-NET-1 (RFC 5737), which no real network uses; the guest has no
# other network anyway.
readonly RDMA_DEVICE=rxe0
readonly RDMA_NETDEV=rdmafs0
readonly RDMA_ADDR=192.0.2.1
readonly RDMA_PREFIX_LEN=24

# Modules the guest loads (with their dependencies, in this order):
#   virtio_pci, virtio_console, virtio_rng  the PCI transport, the serial ports
#                                           carrying stdout/stderr, entropy so
#                                           getrandom() never blocks under TCG
#   9pnet_virtio, 9p                        host root and results shares
#   crc32_generic                           rxe needs a crc32 shash; without it
#                                           "failed to init crc32 algorithm err:-2"
#   rdma_rxe, ib_uverbs, rdma_ucm           soft-RoCE, verbs and rdma_cm from
#                                           user space
#   fuse                                    so the filesystem can be mounted
#   dummy                                   the netdev rxe sits on
#   loop, ext4                              a file system with RWF_NOWAIT for
#                                           a daemon's data (tmpfs has none
#                                           in this kernel): daemon-rdma
readonly GUEST_MODULES=(
	virtio_pci virtio_console virtio_rng
	9pnet_virtio 9p
	crc32_generic
	rdma_rxe ib_uverbs rdma_ucm
	fuse dummy
	loop ext4
)

# Environment passed into the guest (see the header).
readonly ENV_PASS_NAMES=(PATH HOME LANG LANGUAGE LD_LIBRARY_PATH LD_PRELOAD)
readonly ENV_PASS_PREFIXES=(RDMAFS_ MESON_ ASAN_ UBSAN_ LSAN_ TSAN_ MSAN_ MALLOC_ LC_)

# Host commands the harness needs, and the Debian package providing each.
declare -A TOOL_PACKAGE=(
	[qemu-system-x86_64]=qemu-system-x86
	[busybox]=busybox-static
	[modprobe]=kmod
	[depmod]=kmod
	[cpio]=cpio
	[gzip]=gzip
	[apt-get]=apt
	[apt-cache]=apt
	[dpkg-deb]=dpkg
	[flock]=util-linux
	[timeout]=coreutils
	[sha256sum]=coreutils
	# Not used by this script but by init.sh, from the host root in the chroot.
	[rdma]=iproute2
)

cache_dir=${RDMAFS_VM_CACHE:-/var/cache/rdmafs-vm}
timeout_secs=$DEFAULT_TIMEOUT
verbose=0
work_dir=
qemu_pid=

usage() {
	sed -n '4p' "$SELF" | sed 's/^# //' >&2
}

log() {
	echo "vm-run: $*" >&2
}

skip() {
	echo "vm-run: SKIP: $*" >&2
	exit "$EXIT_SKIP"
}

fail() {
	echo "vm-run: FAIL: $*" >&2
	exit "$EXIT_FAIL"
}

parse_args() {
	while [ $# -gt 0 ]; do
		case $1 in
		--cache) [ $# -ge 2 ] || { usage; exit 2; }; cache_dir=$2; shift 2 ;;
		--cache=*) cache_dir=${1#--cache=}; shift ;;
		--timeout) [ $# -ge 2 ] || { usage; exit 2; }; timeout_secs=$2; shift 2 ;;
		--timeout=*) timeout_secs=${1#--timeout=}; shift ;;
		-v | --verbose) verbose=1; shift ;;
		-h | --help) usage; exit 0 ;;
		--) shift; break ;;
		-*) log "unknown option $1"; usage; exit 2 ;;
		*) break ;;
		esac
	done
	[ $# -gt 0 ] || { usage; exit 2; }
	[[ $timeout_secs =~ ^[1-9][0-9]*$ ]] || fail "--timeout wants a positive number of seconds, not '$timeout_secs'"
	command_argv=("$@")
}

# Make sure every host tool is there; as root, install what is missing.
ensure_tools() {
	local tool missing_packages=()
	for tool in "${!TOOL_PACKAGE[@]}"; do
		command -v "$tool" >/dev/null 2>&1 || missing_packages+=("${TOOL_PACKAGE[$tool]}")
	done
	[ ${#missing_packages[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		skip "missing host packages: ${missing_packages[*]} (run scripts/install-deps.sh)"
	fi
	log "installing missing packages: ${missing_packages[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing_packages[@]}" >&2 ||
		skip "cannot install host packages: ${missing_packages[*]}"
	for tool in "${!TOOL_PACKAGE[@]}"; do
		command -v "$tool" >/dev/null 2>&1 || skip "'$tool' still missing after installing ${TOOL_PACKAGE[$tool]}"
	done
}

# The initramfs is useless with a dynamically linked busybox.
busybox_path() {
	local path ldd_output
	path=$(command -v busybox)
	# ldd fails (status 1) on a static binary: only its message counts.
	ldd_output=$(LC_ALL=C ldd "$path" 2>&1 || true)
	if [[ $ldd_output != *"not a dynamic executable"* ]]; then
		skip "$path is dynamically linked; install busybox-static"
	fi
	echo "$path"
}

# Cache directory: the requested one, or a per-user one if that is not
# writable (e.g. /var/cache when not root).
resolve_cache_dir() {
	if mkdir -p -- "$cache_dir" 2>/dev/null && [ -w "$cache_dir" ]; then
		return 0
	fi
	local fallback=${XDG_CACHE_HOME:-$HOME/.cache}/rdmafs-vm
	mkdir -p -- "$fallback" || fail "neither $cache_dir nor $fallback is writable"
	cache_dir=$fallback
}

# Sets kernel_package (e.g. linux-image-6.1.0-56-amd64), kernel_package_version
# and kernel_release (the directory name under /lib/modules).
find_kernel_package() {
	kernel_package=$(apt-cache depends "$KERNEL_METAPACKAGE" 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
	[ -n "$kernel_package" ] || skip "apt-cache knows no kernel behind $KERNEL_METAPACKAGE"
	kernel_package_version=$(apt-cache show --no-all-versions "$kernel_package" 2>/dev/null |
		awk '$1 == "Version:" { print $2; exit }')
	[ -n "$kernel_package_version" ] || skip "apt-cache has no candidate version of $kernel_package"
	kernel_release=${kernel_package#linux-image-}
}

cache_key() {
	{
		cat -- "$SELF" "$INIT_SCRIPT"
		echo "$kernel_package=$kernel_package_version"
		dpkg-query -W -f='${Package}=${Version}\n' busybox-static 2>/dev/null || busybox | head -n 1
	} | sha256sum | cut -c1-16
}

# Copy one module into the initramfs, uncompressed: busybox insmod cannot read
# .ko.xz/.ko.zst/.ko.gz.  Prints the file name it used.  (Debian 12's modules
# are not compressed, so xz and zstd are not in TOOL_PACKAGE.)
copy_module() {
	local src=$1 dest_dir=$2 name
	name=$(basename -- "$src")
	case $name in
	*.ko.xz) name=${name%.xz}; xz -dc -- "$src" >"$dest_dir/$name" ;;
	*.ko.zst) name=${name%.zst}; zstd -qdc -- "$src" >"$dest_dir/$name" ;;
	*.ko.gz) name=${name%.gz}; gzip -dc -- "$src" >"$dest_dir/$name" ;;
	*.ko) cp -- "$src" "$dest_dir/$name" ;;
	*) fail "unexpected module file $src" ;;
	esac
	echo "$name"
}

# Put GUEST_MODULES and their dependencies into $initramfs/lib/modules, plus
# modules.order listing them in load order.
collect_modules() {
	local kernel_root=$1 initramfs=$2 module deps kind path name
	local module_dir=$initramfs/lib/modules
	local -A seen=()
	mkdir -p -- "$module_dir"
	: >"$module_dir/modules.order"
	for module in "${GUEST_MODULES[@]}"; do
		deps=$(modprobe -d "$kernel_root" -S "$kernel_release" --show-depends "$module") ||
			fail "module $module not found in $kernel_package"
		# Lines are "insmod /path/to/dep.ko [options]" (dependencies first)
		# or "builtin name" for what the kernel already has.
		while read -r kind path _; do
			[ "$kind" = insmod ] || continue
			[ -z "${seen[$path]:-}" ] || continue
			seen[$path]=1
			name=$(copy_module "$path" "$module_dir")
			echo "$name" >>"$module_dir/modules.order"
		done <<<"$deps"
	done
}

# Build kernel + initramfs into $1.
build_image() {
	local out=$1 busybox
	local kernel_root=$out/kernel-root initramfs=$out/initramfs
	busybox=$(busybox_path)
	log "preparing guest image for $kernel_package $kernel_package_version in $out (once)"
	# Sandbox user root: apt's _apt user may not be able to write to $out.
	(cd -- "$out" && apt-get download -q -o APT::Sandbox::User=root \
		"$kernel_package=$kernel_package_version" >/dev/null) ||
		skip "cannot download $kernel_package=$kernel_package_version with apt-get"
	dpkg-deb -x "$out"/linux-image-*.deb "$kernel_root"
	depmod -b "$kernel_root" "$kernel_release"
	cp -- "$kernel_root/boot/vmlinuz-$kernel_release" "$out/vmlinuz"

	mkdir -p -- "$initramfs"/{bin,dev,proc,sys,mnt,host,results}
	cp -- "$busybox" "$initramfs/bin/busybox"
	install -m 0755 -- "$INIT_SCRIPT" "$initramfs/init"
	collect_modules "$kernel_root" "$initramfs"
	(cd -- "$initramfs" && find . -print0 |
		cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 >"$out/initrd.img"

	echo "$kernel_package=$kernel_package_version" >"$out/kernel-version"
	rm -rf -- "$kernel_root" "$initramfs" "$out"/linux-image-*.deb
}

# Sets kernel_image and initrd_image, building them unless cached.
prepare_image() {
	local key entry lock_fd tmp old
	resolve_cache_dir
	find_kernel_package
	key=$(cache_key)
	entry=$cache_dir/$key
	if [ ! -f "$entry/initrd.img" ]; then
		# Several tests may start at once: one builds, the others wait.
		exec {lock_fd}>"$cache_dir/.lock"
		flock "$lock_fd"
		if [ ! -f "$entry/initrd.img" ]; then
			tmp=$(mktemp -d "$cache_dir/build.XXXXXX")
			build_image "$tmp"
			mv -- "$tmp" "$entry"
			# Older kernels or older versions of this harness.
			for old in "$cache_dir"/*/; do
				old=${old%/}
				[ "$old" = "$entry" ] || rm -rf -- "$old"
			done
		fi
		exec {lock_fd}>&-
	fi
	kernel_image=$entry/vmlinuz
	initrd_image=$entry/initrd.img
}

# The script init.sh runs in the chroot: caller's environment, cwd, command.
write_job() {
	local job=$1 cwd=$2 name prefix pass
	{
		echo "# Generated by $SELF; run by init.sh in the guest."
		while read -r name; do
			[[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
			pass=0
			for prefix in "${ENV_PASS_NAMES[@]}"; do
				[ "$name" = "$prefix" ] && pass=1
			done
			for prefix in "${ENV_PASS_PREFIXES[@]}"; do
				[[ $name == "$prefix"* ]] && pass=1
			done
			[ "$pass" -eq 1 ] && printf 'export %s=%q\n' "$name" "${!name}"
		done < <(compgen -e)
		echo "export RDMAFS_IN_VM=1"
		echo "export RDMAFS_VM_RDMA_DEV=$RDMA_DEVICE"
		echo "export RDMAFS_VM_RDMA_ADDR=$RDMA_ADDR"
		printf 'cd -- %q || exit %d\n' "$cwd" "$EXIT_FAIL"
		printf 'exec'
		printf ' %q' "${command_argv[@]}"
		printf '\n'
	} >"$job"
}

print_console_tail() {
	log "last $CONSOLE_TAIL_LINES lines of the guest console:"
	tail -n "$CONSOLE_TAIL_LINES" -- "$work_dir/console.log" >&2 2>/dev/null || true
	if [ -s "$work_dir/qemu.log" ]; then
		log "QEMU said:"
		cat -- "$work_dir/qemu.log" >&2
	fi
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
	if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
		kill -TERM "$qemu_pid" 2>/dev/null || true
		wait "$qemu_pid" 2>/dev/null || true
	fi
	[ -z "$work_dir" ] || rm -rf -- "$work_dir"
}

# Boot the guest, wait for it; sets qemu_status.
boot_guest() {
	local share=$1 out_fd err_fd out_relay err_relay
	# The guest's stdout and stderr ports write to pipes that a cat copies
	# to ours.  Handing QEMU our own fds (-add-fd fd=1) would be simpler but
	# QEMU sets O_NONBLOCK (and O_APPEND) on them and never clears it: that
	# would leak to whoever shares our stdout, e.g. the rest of a shell
	# script, which then gets EAGAIN on a full pipe.
	exec {out_fd}> >(exec cat)
	out_relay=$!
	exec {err_fd}> >(exec cat >&2)
	err_relay=$!
	# append=on: by default QEMU opens a file chardev with O_TRUNC, and for a
	# passed fd that means ftruncate(), which fails on a pipe.
	# QEMU's own messages go to a log, shown only if the guest fails.
	timeout --kill-after="$KILL_GRACE" "$timeout_secs" \
		qemu-system-x86_64 \
		-accel tcg -cpu max -m "$GUEST_MEMORY" -smp "$GUEST_CPUS" \
		-nodefaults -no-user-config -display none -nic none -no-reboot \
		-serial "file:$work_dir/console.log" \
		-kernel "$kernel_image" -initrd "$initrd_image" \
		-append "console=ttyS0 quiet panic=-1" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$share,mount_tag=results,security_model=none" \
		-device virtio-rng-pci \
		-device virtio-serial-pci \
		-add-fd fd=3,set=1 -chardev file,id=guest-stdout,path=/dev/fdset/1,append=on \
		-device virtserialport,chardev=guest-stdout,name=rdmafs.stdout \
		-add-fd fd=4,set=2 -chardev file,id=guest-stderr,path=/dev/fdset/2,append=on \
		-device virtserialport,chardev=guest-stderr,name=rdmafs.stderr \
		</dev/null 3>&"$out_fd" 4>&"$err_fd" 2>"$work_dir/qemu.log" &
	qemu_pid=$!
	# Only QEMU holds the pipes now: the relays end when it does.
	exec {out_fd}>&- {err_fd}>&-
	qemu_status=0
	wait "$qemu_pid" || qemu_status=$?
	qemu_pid=
	wait "$out_relay" "$err_relay" || true
}

# The guest's /tmp, /var/tmp and /root are fresh tmpfs, which would hide a
# checkout or build tree there (CI clones may live under /tmp). List what must stay
# visible: the working directory, every path among the command's arguments
# (a file's directory), and the colon-separated RDMAFS_VM_EXPOSE.
write_expose() {
	local out=$1 arg path
	local -a paths=("$(pwd -P)")
	for arg in "${command_argv[@]}"; do
		[ -e "$arg" ] || continue
		path=$(realpath -- "$arg")
		[ -d "$path" ] || path=$(dirname -- "$path")
		paths+=("$path")
	done
	if [ -n "${RDMAFS_VM_EXPOSE:-}" ]; then
		local IFS=:
		for arg in $RDMAFS_VM_EXPOSE; do
			[ -d "$arg" ] && paths+=("$(realpath -- "$arg")")
		done
	fi
	printf '%s\n' "${paths[@]}" >"$out"
}

main() {
	local share status started elapsed
	parse_args "$@"
	ensure_tools
	prepare_image

	work_dir=$(mktemp -d "${TMPDIR:-/tmp}/rdmafs-vm.XXXXXX")
	trap cleanup EXIT
	# Turn signals into a normal exit so the EXIT trap stops QEMU.
	trap 'exit 143' TERM
	trap 'exit 130' INT
	share=$work_dir/share
	mkdir -- "$share"
	pwd -P >"$share/cwd"
	write_expose "$share/expose"
	# Sourced by init.sh (busybox sh): plain NAME=value lines.
	cat >"$share/guest.conf" <<-EOF
		RDMA_DEVICE=$RDMA_DEVICE
		RDMA_NETDEV=$RDMA_NETDEV
		RDMA_ADDR=$RDMA_ADDR
		RDMA_PREFIX_LEN=$RDMA_PREFIX_LEN
	EOF
	write_job "$share/job.sh" "$(pwd -P)"

	started=$SECONDS
	boot_guest "$share"
	elapsed=$((SECONDS - started))

	if [ "$verbose" -eq 1 ]; then
		log "guest console:"
		cat -- "$work_dir/console.log" >&2 || true
		log "QEMU ran ${elapsed}s (exit status $qemu_status)"
	fi
	if [ "$qemu_status" -eq "$EXIT_TIMEOUT" ]; then
		print_console_tail
		fail "guest killed after the ${timeout_secs}s timeout"
	fi
	status=$(cat -- "$share/status" 2>/dev/null || true)
	if ! [[ $status =~ ^[0-9]+$ ]]; then
		print_console_tail
		fail "guest produced no exit status (QEMU exit status $qemu_status after ${elapsed}s)"
	fi
	exit "$status"
}

main "$@"
