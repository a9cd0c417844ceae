#!/usr/bin/env bash
# Installs every Debian package rdmafs needs to build, test and benchmark.
# Safe to run again: apt-get skips what is already there.
set -euo pipefail

build_packages=(
	build-essential meson ninja-build pkg-config clang llvm clang-format
	libibverbs-dev librdmacm-dev rdma-core ibverbs-utils
	libfuse3-dev fuse3 liburing-dev
	libprotobuf-c-dev protobuf-c-compiler
	liblmdb-dev libisal-dev libinih-dev libsodium-dev libsystemd-dev libmicrohttpd-dev
	libcmocka-dev
)
test_packages=(
	qemu-system-x86 busybox-static kmod cpio perftest rdmacm-utils
	fio bindfs glusterfs-server glusterfs-client rsync attr acl xfsprogs e2fsprogs python3 python3-prometheus-client curl valgrind
	iproute2 nftables
	dpkg-dev debhelper devscripts
)

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: run as root (apt-get needs it)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${build_packages[@]}" "${test_packages[@]}" >/dev/null
echo "install-deps: all packages present"
