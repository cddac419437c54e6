#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# deb.sh - the Debian packages, end to end: builds them (dpkg-buildpackage
# -us -uc -b, no test suite, no debug symbols) from a copy of the tree in a
# scratch directory (make distdir from top_builddir when it is a configured
# build, else git archive of HEAD), runs lintian (no errors), installs them
# with dpkg -i, runs famd -t on the installed /etc/famd.conf and famctl
# --version, checks what dpkg -L lists, preloads libfamshim.so by name,
# builds a program against libfamd-client-dev, then purges them and checks
# that nothing they installed is left. Needs root and Debian's packaging
# tools (scripts/install-deps); exits 77 (skip), saying why, without them
# or when a famd is already installed here (it would be replaced, then
# purged). A few minutes, mostly the build.
# usage: [top_srcdir=DIR] [top_builddir=DIR] tests/pkg/deb.sh
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-}
PKGS="famd libfamd-client0 libfamshim libfamd-client-dev"
work=
installed=0

# skip REASON: exits 77, saying why.
skip() {
	echo "deb.sh: skipped: $*"
	exit 77
}

# fail MESSAGE: exits 1, saying what went wrong.
fail() {
	echo "deb.sh: FAIL: $*" >&2
	exit 1
}

# cleanup: purges what this run installed (when it stopped half-way) and
# removes the scratch directory.
cleanup() {
	[ "$installed" = 1 ] && dpkg_retry --purge $PKGS >/dev/null 2>&1
	[ -n "$work" ] && rm -rf "$work"
}

# dpkg_retry ARGS...: dpkg ARGS, waiting up to a minute while another
# dpkg or apt on the machine holds the lock.
dpkg_retry() {
	local i out rc
	for i in $(seq 60); do
		out=$(dpkg "$@" 2>&1)
		rc=$?
		if [ $rc -ne 0 ] && grep -q 'lock' <<<"$out"; then
			sleep 1
			continue
		fi
		printf '%s\n' "$out"
		return $rc
	done
	printf '%s\n' "$out"
	return 1
}

# expected PACKAGE: the files PACKAGE must install, one a line.
expected() {
	case $1 in
	famd)
		echo /usr/sbin/famd /usr/bin/famctl /etc/famd.conf \
			/lib/systemd/system/famd.service \
			/usr/share/famd/examples/famd-host.conf \
			/usr/share/famd/examples/famd-dpu.conf \
			/usr/share/famd/examples/famd-memory.conf \
			/usr/share/man/man8/famd.8.gz /usr/share/man/man8/famctl.8.gz \
			/usr/share/man/man5/famd.conf.5.gz \
			/usr/share/doc/famd/copyright ;;
	libfamd-client0)
		echo "/usr/lib/$triplet/libfamd-client.so.0" \
			/usr/share/doc/libfamd-client0/copyright ;;
	libfamshim)
		echo "/usr/lib/$triplet/libfamshim.so" \
			/usr/share/man/man7/libfamshim.7.gz \
			/usr/share/doc/libfamshim/copyright ;;
	libfamd-client-dev)
		echo /usr/include/famd-client/famd-client.h \
			"/usr/lib/$triplet/libfamd-client.so" \
			"/usr/lib/$triplet/pkgconfig/famd-client.pc" \
			/usr/share/man/man3/libfamd-client.3.gz ;;
	esac | tr ' ' '\n'
}

[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i)"
for tool in dpkg-buildpackage dh lintian dpkg-architecture; do
	command -v $tool >/dev/null ||
		skip "$tool is not installed (scripts/install-deps installs debhelper, devscripts, lintian)"
done
for p in $PKGS; do
	case $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) in
	''|*not-installed) ;;
	*) skip "the package $p is on this machine already (dpkg --purge $p first)" ;;
	esac
done
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for p in $PKGS; do
	for f in $(expected "$p"); do
		[ -e "$f" ] || [ -L "$f" ] &&
			skip "$f exists (a make install?): the packages would replace it, and purging them remove it"
	done
done

trap cleanup EXIT
work=$(mktemp -d /tmp/famd-deb.XXXXXX) || fail "mktemp"
chmod 755 "$work"
src=$work/famd

# The tree: the tarball's files from a configured build (what make dist
# would ship, uncommitted changes too), else HEAD.
if [ -n "$top_builddir" ] && [ -f "$top_builddir/Makefile" ]; then
	echo "deb.sh: the tree from make distdir in $top_builddir"
	make -s -C "$top_builddir" distdir distdir="$src" >"$work/dist.log" 2>&1 ||
		{ cat "$work/dist.log"; fail "make distdir"; }
elif git -C "$top_srcdir" rev-parse --git-dir >/dev/null 2>&1; then
	echo "deb.sh: the tree from git archive HEAD of $top_srcdir"
	mkdir -p "$src" && git -C "$top_srcdir" archive HEAD | tar -x -C "$src" ||
		fail "git archive"
else
	skip "neither a configured build (top_builddir) nor a git checkout to copy"
fi
[ -d "$src/debian" ] || fail "the copied tree has no debian/ (EXTRA_DIST?)"

echo "deb.sh: dpkg-buildpackage -us -uc -b"
(cd "$src" && DEB_BUILD_OPTIONS="nocheck noddebs parallel=${DEB_JOBS:-2}" \
	dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) ||
	{ tail -n 60 "$work/build.log"; fail "dpkg-buildpackage"; }
ver=$(cd "$src" && dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
debs=
for p in $PKGS; do
	d=$work/${p}_${ver}_$arch.deb
	[ -f "$d" ] || fail "dpkg-buildpackage made no $(basename "$d")"
	debs="$debs $d"
done

echo "deb.sh: lintian (errors fail)"
lintian --display-info --fail-on error "$work"/famd_"${ver}"_"$arch".changes >"$work/lintian.log" 2>&1
rc=$?
cat "$work/lintian.log"
[ $rc -eq 0 ] || fail "lintian reports errors"

echo "deb.sh: dpkg -i"
# shellcheck disable=SC2086
out=$(dpkg_retry -i $debs) || { echo "$out"; installed=1; fail "dpkg -i"; }
installed=1
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" | grep -qx 'install ok installed' ||
		fail "$p is not installed after dpkg -i: $(dpkg-query -W -f='${Status}' "$p")"
done

# The files each package lists, and which of them (directories shared with
# other packages) were there before.
for p in $PKGS; do
	dpkg -L "$p" >"$work/$p.list" || fail "dpkg -L $p"
	for f in $(expected "$p"); do
		grep -qx "$f" "$work/$p.list" || fail "dpkg -L $p does not list $f"
		[ -e "$f" ] || fail "$f is listed by $p but missing"
	done
done
dpkg-query -W -f='${Conffiles}\n' famd | grep -q '^ /etc/famd.conf ' ||
	fail "/etc/famd.conf is not a conffile of famd"

getent group famd >/dev/null || fail "the system group famd (session_group's default) was not created"

echo "deb.sh: famd -t; famctl --version"
out=$(/usr/sbin/famd -t 2>&1) || fail "famd -t on the installed /etc/famd.conf: $out"
echo "$out"
out=$(/usr/sbin/famd -t -c /etc/famd.conf 2>&1) || fail "famd -t -c /etc/famd.conf: $out"
out=$(/usr/bin/famctl --version 2>&1) || fail "famctl --version: $out"
echo "$out"
grep -q "${ver%%-*}" <<<"$out" || fail "famctl --version does not say ${ver%%-*}"
out=$(/usr/sbin/famd --version 2>&1) || fail "famd --version: $out"
grep -q "${ver%%-*}" <<<"$out" || fail "famd --version does not say ${ver%%-*}"

echo "deb.sh: LD_PRELOAD=libfamshim.so by name; a program built with pkg-config famd-client"
out=$(LD_PRELOAD=libfamshim.so /bin/true 2>&1)
grep -q 'cannot be preloaded' <<<"$out" && fail "libfamshim.so is not found by name: $out"
cat >"$work/prog.c" <<'EOF'
#include <stdio.h>
#include <famd-client/famd-client.h>

int
main(void)
{
	printf("%d\n", fam_owns(NULL));
	return 0;
}
EOF
# shellcheck disable=SC2046
gcc -o "$work/prog" "$work/prog.c" $(pkg-config --cflags --libs famd-client) \
	>"$work/prog.log" 2>&1 || { cat "$work/prog.log"; fail "building against libfamd-client-dev"; }
ldd "$work/prog" | grep -q "libfamd-client.so.0 => \(/usr\)\?/lib/$triplet/" ||
	fail "the program does not load the packaged libfamd-client.so.0: $(ldd "$work/prog")"
"$work/prog" >/dev/null || fail "a program linked with libfamd-client does not run"

if [ -d /etc/systemd/system ]; then
	[ -L /etc/systemd/system/multi-user.target.wants/famd.service ] ||
		fail "famd.service is not enabled after the install"
fi

echo "deb.sh: dpkg --purge"
# shellcheck disable=SC2086
out=$(dpkg_retry --purge $PKGS) || fail "dpkg --purge: $out"
installed=0
for p in $PKGS; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
	case $st in
	''|'unknown ok not-installed'|'purge ok not-installed') ;;
	*) fail "$p is still known to dpkg after the purge: $st" ;;
	esac
done
left=
for p in $PKGS; do
	while read -r f; do
		[ "$f" = /. ] && continue
		# Directories other packages also use (/usr/lib/..., /lib, a link
		# to /usr/lib where /usr is merged) stay.
		if [ -d "$f" ]; then
			[ -z "$(ls -A "$f")" ] || continue
			dpkg -S "$f" >/dev/null 2>&1 && continue
		fi
		[ -e "$f" ] || [ -L "$f" ] && left="$left $f"
	done <"$work/$p.list"
done
for f in /etc/famd.conf /etc/systemd/system/multi-user.target.wants/famd.service \
	/var/lib/systemd/deb-systemd-helper-enabled/famd.service.dsh-also \
	/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/famd.service; do
	[ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done
[ -z "$left" ] || fail "left behind after the purge:$left"
echo "deb.sh: built, installed, tried and purged: nothing left"
exit 0
