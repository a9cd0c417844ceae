#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# The round trips backup and migration jobs do: a local tree with hard links,
# symlinks, xattrs, a sparse file, a fifo, odd names (spaces, a newline,
# unicode, a leading dash, 255 bytes) and varied owners, modes and mtimes is
# copied into DIR and back out with `tar c | tar x`, `cp -a` and
# `rsync -aHAX`; after each step the copy must match the source byte for
# byte and in metadata: type, mode, uid/gid, mtime (ns), size, user.*
# xattrs, symlink targets and which names share an inode.
# Usage: backup.sh DIR
# Exit: 0 pass, 1 fail, 99 the test itself could not check (a tool missing:
# scripts/install-deps.sh installs them all).
set -u
mnt=${1:?usage: backup.sh DIR}
. "$(dirname "$(readlink -f "$0")")/../lib/check.sh"
check_need tar cp rsync python3 setfattr diff

fail() {
	check_fail "$@"
}
# a hang is a failure: every copy is bounded
t() {
	timeout 600 "$@"
}

local_dir=$(mktemp -d "${TMPDIR:-/tmp}/backup.XXXXXX") || check_error "mktemp"
work=$(mktemp -d "$mnt/backup.XXXXXX") || fail "mktemp in $mnt"
trap 'rm -rf "$local_dir"' EXIT
src=$local_dir/src

# --- the source tree ----------------------------------------------------------
build_tree() {
	local long
	mkdir -p "$src"/files "$src"/links/other "$src"/names "$src"/modes/private \
		"$src"/empty-dir || return 1
	: >"$src/files/empty"
	printf 'small text\n' >"$src/files/small"
	head -c 4097 /dev/urandom >"$src/files/4097-bytes"
	head -c $((1536 * 1024 + 3)) /dev/urandom >"$src/files/1.5MiB"
	# sparse: 20 MiB, data only at 10 MiB and at the end
	truncate -s 20M "$src/files/sparse"
	head -c 4096 /dev/urandom | dd of="$src/files/sparse" bs=4096 seek=2560 conv=notrunc status=none
	printf 'tail' | dd of="$src/files/sparse" bs=1 seek=$((20 * 1024 * 1024 - 4)) conv=notrunc status=none
	# hard links: two in one directory, one in another
	head -c 70000 /dev/urandom >"$src/links/a"
	ln "$src/links/a" "$src/links/b"
	ln "$src/links/a" "$src/links/other/c"
	ln "$src/files/small" "$src/links/small-link"
	# symlinks: relative, absolute and dangling, to a directory
	ln -s ../files/small "$src/links/rel"
	ln -s /nonexistent/target "$src/links/dangling"
	ln -s other "$src/links/to-dir"
	# odd names
	printf 'space' >"$src/names/with space"
	printf 'newline' >"$src/names/new"$'\n'"line"
	printf 'unicode' >"$src/names/ünïcødé-日本語-🙂"
	printf 'dash' >"$src/names/-leading-dash"
	printf 'quotes' >"$src/names/quote'\"\\back"
	printf 'glob' >"$src/names/*?[glob]"
	long=$(printf 'L%.0s' $(seq 251))
	printf 'long' >"$src/names/$long.end"
	mkdir "$src/names/dir with space"
	printf 'deep' >"$src/names/dir with space/-x"
	mkfifo "$src/names/fifo"
	# modes and owners
	printf 'x' >"$src/modes/0600"
	chmod 0600 "$src/modes/0600"
	printf 'x' >"$src/modes/0755"
	chmod 0755 "$src/modes/0755"
	printf 'x' >"$src/modes/0444"
	chmod 0444 "$src/modes/0444"
	printf 'x' >"$src/modes/setgid"
	chmod 2755 "$src/modes/setgid"
	chmod 0700 "$src/modes/private"
	mkdir "$src/modes/sticky"
	chmod 1777 "$src/modes/sticky"
	chown 1234:4321 "$src/modes/0600" "$src/modes/private"
	chown 65534:65534 "$src/modes/0755" "$src/names/with space"
	chown -h 4321:1234 "$src/links/rel"
	# xattrs: text, binary, empty, on a file, a directory and a hard link
	setfattr -n user.text -v "hello xattr" "$src/files/small" &&
		setfattr -n user.binary -v 0x00ff10ee "$src/files/small" &&
		setfattr -n user.empty "$src/files/1.5MiB" &&
		setfattr -n user.dir -v "on a dir" "$src/names" &&
		setfattr -n user.link -v "on the inode" "$src/links/a" || return 1
	# mtimes, ns precision, deepest first so directories keep theirs
	find "$src" -depth -exec touch -h -d '2001-02-03 04:05:06.123456789' {} + &&
		touch -h -d '2010-01-01 00:00:00.5' "$src/files/small" "$src/links/rel" "$src"
}
build_tree || fail "cannot build the source tree (xattrs on ${TMPDIR:-/tmp}?)"

# --- the comparison -------------------------------------------------------------
# manifest TREE: one line per entry, sorted, names escaped
manifest() {
	python3 - "$1" <<'EOF'
import hashlib, os, stat, sys
root = sys.argv[1]
lines, inodes = [], {}
for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
        path = os.path.join(dirpath, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            inodes.setdefault((st.st_dev, st.st_ino), []).append(os.path.relpath(path, root))
def entry(path, rel):
    st = os.lstat(path)
    f = [repr(rel), stat.filemode(st.st_mode), '%o' % stat.S_IMODE(st.st_mode),
         'uid=%d' % st.st_uid, 'gid=%d' % st.st_gid, 'mtime=%d' % st.st_mtime_ns]
    if stat.S_ISREG(st.st_mode):
        h = hashlib.sha256()
        with open(path, 'rb') as fp:
            for block in iter(lambda: fp.read(1 << 20), b''):
                h.update(block)
        f += ['size=%d' % st.st_size, 'sha256=' + h.hexdigest(), 'nlink=%d' % st.st_nlink]
        group = inodes.get((st.st_dev, st.st_ino))
        if group:
            f.append('links=' + repr(sorted(group)))
    elif stat.S_ISLNK(st.st_mode):
        f.append('target=' + repr(os.readlink(path)))
    if not stat.S_ISLNK(st.st_mode) and not stat.S_ISFIFO(st.st_mode):
        for x in sorted(os.listxattr(path, follow_symlinks=False)):
            if x.startswith('user.'):
                f.append('%s=%s' % (x, os.getxattr(path, x, follow_symlinks=False).hex()))
    return ' '.join(f)
lines.append(entry(root, '.'))
for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
        path = os.path.join(dirpath, name)
        lines.append(entry(path, os.path.relpath(path, root)))
print('\n'.join(sorted(lines)))
EOF
}

manifest "$src" >"$local_dir/src.manifest" || fail "manifest of the source"
[ "$(wc -l <"$local_dir/src.manifest")" -ge 30 ] || fail "the source tree is incomplete"
grep -q "links=" "$local_dir/src.manifest" && grep -q "user.binary=00ff10ee" "$local_dir/src.manifest" ||
	fail "the source manifest lacks hard links or xattrs"

# same TREE WHAT: TREE matches the source
same() {
	manifest "$1" >"$local_dir/copy.manifest" || fail "$2: manifest of $1"
	check_diff "$local_dir/src.manifest" "$local_dir/copy.manifest" "$2: $1 against the source"
	echo "ok   $2"
}

tar_opts=(--xattrs --xattrs-include='user.*' --numeric-owner)
# tar c | tar x, in, then out
mkdir "$work/tar" "$local_dir/tar-out"
t bash -c 'set -o pipefail; tar -C "$1" --format=posix --sparse "${@:3}" -cf - . |
	tar -C "$2" --same-owner -p "${@:3}" -xf -' tar "$src" "$work/tar" "${tar_opts[@]}" ||
	fail "tar c | tar x into the mount"
same "$work/tar" "tar c | tar x into the mount"
t bash -c 'set -o pipefail; tar -C "$1" --format=posix --sparse "${@:3}" -cf - . |
	tar -C "$2" --same-owner -p "${@:3}" -xf -' tar "$work/tar" "$local_dir/tar-out" "${tar_opts[@]}" ||
	fail "tar c | tar x out of the mount"
same "$local_dir/tar-out" "tar c | tar x out of the mount"

# cp -a, in, then out
t cp -a "$src" "$work/cp" || fail "cp -a into the mount"
same "$work/cp" "cp -a into the mount"
t cp -a "$work/cp" "$local_dir/cp-out" || fail "cp -a out of the mount"
same "$local_dir/cp-out" "cp -a out of the mount"

# rsync -aHAX, in, then out
t rsync -aHAX "$src/" "$work/rsync/" || fail "rsync -aHAX into the mount"
same "$work/rsync" "rsync -aHAX into the mount"
t rsync -aHAX "$work/rsync/" "$local_dir/rsync-out/" || fail "rsync -aHAX out of the mount"
same "$local_dir/rsync-out" "rsync -aHAX out of the mount"
# a second rsync finds nothing to do (sizes and mtimes match)
changed=$(t rsync -aHAX --itemize-changes "$src/" "$work/rsync/" | grep -v '^\.d\.\.\.\.\.\.\.\.\.' )
[ -z "$changed" ] || fail "a second rsync into the mount still copies: $changed"
echo "ok   a second rsync -aHAX has nothing to copy"

t rm -rf "$work" || fail "removing $work from the mount"
echo "pass"
