#!/bin/busybox sh
# shellcheck shell=dash
# /init of the throw-away initramfs that tests/rdma-vm/vm-run.sh boots in QEMU.
#
# It runs as PID 1 under busybox ash.  Its job: load the modules for virtio, 9p,
# soft-RoCE and FUSE, mount the host's root (read-only 9p) and the results
# share (read-write 9p), create the rxe device, chroot into the host root,
# run the job script that vm-run.sh wrote into the results share, record the
# job's exit status and power the machine off.
#
# Everything this script prints goes to the serial console, which vm-run.sh
# keeps in a log and only shows when the guest fails.  The job's own stdout and
# stderr go to two virtio-serial ports that QEMU connects to vm-run.sh's stdout
# and stderr.  If anything here fails, no status is written; vm-run.sh then
# reports a guest failure with the console tail.

# Mount points.  /host and /results exist in the initramfs; HOST_RESULTS is
# where the job sees the results share after the chroot (vm-run.sh relies on
# this path when it writes the job script).
HOST=/host
RESULTS=/results
HOST_RESULTS=/run/rdmafs-vm
# Bigger 9p messages than the default mean fewer round trips through the
# emulated virtio ring; 512 KiB is the largest the virtio transport accepts.
NINEP_MSIZE=524288

/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

log() { echo "rdmafs-vm-init: $*"; }

power_off() {
	sync
	poweroff -f
	# poweroff -f needs ACPI; the sysrq trigger is the fallback.
	echo o >/proc/sysrq-trigger
	sleep 60
}

die() {
	log "FAILED: $*"
	power_off
}

mount -t proc proc /proc || die "mount /proc"
mount -t sysfs sysfs /sys || die "mount /sys"
mount -t devtmpfs devtmpfs /dev || die "mount /dev"

# modules.order lists the module files in dependency order (vm-run.sh wrote it
# from modprobe --show-depends), so plain insmod is enough.
while read -r module; do
	insmod "/lib/modules/$module" || die "insmod $module"
done </lib/modules/modules.order

# cache=loose: the guest never writes the host root and the job does not
# expect to see host-side changes while it runs; caching pages and metadata in
# the guest made starting a program about 5x faster (50 runs of ibv_devinfo:
# 6 s instead of 33 s).
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=$NINEP_MSIZE \
	hostroot "$HOST" || die "mount host root"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=$NINEP_MSIZE \
	results "$RESULTS" || die "mount results share"

# The job's working directory, as vm-run.sh saw it on the host.
cwd=$(cat "$RESULTS/cwd") || die "read cwd"

# Keep a view of the host's /tmp, /var/tmp and /root: the fresh tmpfs below
# hide them, but the caller may be running from a directory there.
mkdir -p /mnt/host-tmp /mnt/host-var-tmp /mnt/host-root
mount --bind "$HOST/tmp" /mnt/host-tmp || die "bind host /tmp"
mount --bind "$HOST/var/tmp" /mnt/host-var-tmp || die "bind host /var/tmp"
mount --bind "$HOST/root" /mnt/host-root || die "bind host /root"

# The host root is read-only and its /proc, /sys and /dev are the host's files
# seen through 9p: put the guest's own on top, plus writable tmpfs where
# programs expect to write.
mount --rbind /proc "$HOST/proc" || die "bind /proc"
mount --rbind /sys "$HOST/sys" || die "bind /sys"
mount --rbind /dev "$HOST/dev" || die "bind /dev"
mkdir -p "$HOST/dev/pts" "$HOST/dev/shm"
mount -t devpts devpts "$HOST/dev/pts" || die "mount devpts"
mount -t tmpfs -o mode=1777 tmpfs "$HOST/dev/shm" || die "mount /dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$HOST/tmp" || die "mount /tmp"
mount -t tmpfs -o mode=0755 tmpfs "$HOST/run" || die "mount /run"
mkdir -p "$HOST$HOST_RESULTS"
mount --bind "$RESULTS" "$HOST$HOST_RESULTS" || die "bind results share"

# What a Linux userland expects and a bare devtmpfs, a read-only root and no
# udev or systemd leave out.  Without /dev/fd, bash's process substitution
# fails ("cat: /dev/fd/63: No such file"), and a check like cmp FILE <(...)
# then fails for the test's own reason, not the data's.  udev makes /dev/fuse
# world-writable (fusermount for users); systemd mounts cgroup2 and fusectl;
# /var/tmp and root's home are writable on a real host; systemd raises the
# open-file limit well above the kernel's 1024.
ln -sf /proc/self/fd "$HOST/dev/fd" || die "link /dev/fd"
ln -sf /proc/self/fd/0 "$HOST/dev/stdin" || die "link /dev/stdin"
ln -sf /proc/self/fd/1 "$HOST/dev/stdout" || die "link /dev/stdout"
ln -sf /proc/self/fd/2 "$HOST/dev/stderr" || die "link /dev/stderr"
[ -c "$HOST/dev/fuse" ] && chmod 0666 "$HOST/dev/fuse"
mount -t tmpfs -o mode=1777 tmpfs "$HOST/var/tmp" || die "mount /var/tmp"
mount -t tmpfs -o mode=0700 tmpfs "$HOST/root" || die "mount /root"
mount -t cgroup2 cgroup2 "$HOST/sys/fs/cgroup" || die "mount cgroup2"
mount -t fusectl fusectl "$HOST/sys/fs/fuse/connections" || die "mount fusectl"
hostname rdmafs-vm || die "hostname"
ulimit -n 65536 || die "ulimit -n"

# Paths under the host's /tmp, /var/tmp or /root that the job needs (its cwd,
# its program and arguments: vm-run.sh listed them) stay visible, read-only,
# at the same place.
expose() {
	[ -d "$2/$3" ] || return 0
	mkdir -p "$HOST$1" || die "mkdir $1"
	mount --bind "$2/$3" "$HOST$1" || die "bind $1"
}
while read -r path; do
	case "$path" in
	/tmp/*) expose "$path" /mnt/host-tmp "${path#/tmp/}" ;;
	/var/tmp/*) expose "$path" /mnt/host-var-tmp "${path#/var/tmp/}" ;;
	/root/*) expose "$path" /mnt/host-root "${path#/root/}" ;;
	esac
done <"$RESULTS/expose"

# Soft-RoCE.  Not on lo: rdma_cm cannot resolve a route over a loopback-type
# netdev (rdma_resolve_route fails with ENODEV for 127.0.0.1; lo is
# ARPHRD_LOOPBACK, rdma_cm wants an Ethernet device).  A dummy netdev carrying
# one address works: connections to that address stay inside rxe (it loops
# packets back itself when source and destination are the same).  vm-run.sh
# chose the names and the address (guest.conf) and tells the job about them.
# shellcheck source=/dev/null
. "$RESULTS/guest.conf" || die "read guest.conf"
ip link set lo up || die "lo up"
ip link add "$RDMA_NETDEV" type dummy || die "add $RDMA_NETDEV"
ip addr add "$RDMA_ADDR/$RDMA_PREFIX_LEN" dev "$RDMA_NETDEV" || die "address $RDMA_NETDEV"
ip link set "$RDMA_NETDEV" up || die "$RDMA_NETDEV up"
# busybox has no rdma(8): use iproute2's from the host root.
chroot "$HOST" rdma link add "$RDMA_DEVICE" type rxe netdev "$RDMA_NETDEV" ||
	die "rdma link add $RDMA_DEVICE"

# RDMA pins memory: let the job register as much as it likes.
ulimit -l unlimited || die "ulimit -l"

# Find the two virtio-serial ports by the names vm-run.sh gave them.
port_dev() {
	for p in /sys/class/virtio-ports/*; do
		if [ "$(cat "$p/name" 2>/dev/null)" = "$1" ]; then
			echo "/dev/${p##*/}"
			return 0
		fi
	done
	return 1
}
out=$(port_dev rdmafs.stdout) || die "no stdout port"
err=$(port_dev rdmafs.stderr) || die "no stderr port"

log "running job, $(cut -d' ' -f1 /proc/uptime)s after boot"
# env -i: the job script sets the whole environment itself.
chroot "$HOST" /usr/bin/env -i /bin/bash "$HOST_RESULTS/job.sh" </dev/null >"$out" 2>"$err"
status=$?
log "job exited with status $status, $(cut -d' ' -f1 /proc/uptime)s after boot"

echo "$status" >"$RESULTS/status.tmp" && mv "$RESULTS/status.tmp" "$RESULTS/status"
power_off
