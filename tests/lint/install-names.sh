#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# install-names.sh - make install DESTDIR=...: a program builds against the
# installed header and pkg-config file, and no installed file name (a man
# page also as NAME.gz) nor any library's SONAME is a file of a Debian 12
# package (libfam.so.0 and fam.h were libgamin's). Debian's file lists come
# from apt-file's Contents index (scripts/install-deps runs apt-file update,
# about 46 MB); without it the test says so and is skipped (77).
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:=$top_builddir}"

fail() { echo "FAIL: $*"; exit 1; }
# quote: stdin with every ERE metacharacter escaped.
quote() { sed 's/[]\\.*^$()+?{}|[]/\\&/g'; }
skip() { echo "SKIP: $*"; exit 77; }
T=$(mktemp -d /tmp/famd-install-names.XXXXXX) || exit 99
trap 'rm -rf "$T"' EXIT
root=$T/root

# The install, as a packager does it, without the parent make's job server.
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" -s -C "$top_builddir" \
	install DESTDIR="$root" >"$T/install.log" 2>&1; then
	cat "$T/install.log"
	fail "make install DESTDIR=$root"
fi
mapfile -t files < <(cd "$root" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort)
[ "${#files[@]}" -gt 0 ] || fail "make install installed nothing"
printf '%s\n' "${files[@]}" | sed 's/^/installed: /'

# famd in sbin (systemd starts it); famctl in bin, on the PATH of the
# admin_group members it is for.
printf '%s\n' "${files[@]}" | grep -q '/sbin/famd$' || fail "famd is not installed in sbin"
printf '%s\n' "${files[@]}" | grep -q '/bin/famctl$' && ! printf '%s\n' "${files[@]}" | grep -q '/sbin/famctl$' ||
	fail "famctl is not installed in bin"
echo "PASS: famd in sbin, famctl in bin"

# The header is <famd-client/famd-client.h>, found through pkg-config.
pc=$(printf '%s\n' "${files[@]}" | grep '/pkgconfig/famd-client\.pc$') ||
	fail "no famd-client.pc installed"
cat >"$T/prog.c" <<'EOF'
#include <famd-client/famd-client.h>
int main(void) { return fam_owns((void *)0); }
EOF
flags=$(PKG_CONFIG_PATH=$root${pc%/*} PKG_CONFIG_SYSROOT_DIR=$root \
	pkg-config --cflags --libs famd-client) || fail "pkg-config famd-client"
# shellcheck disable=SC2086
"${CC:-cc}" -o "$T/prog" "$T/prog.c" $flags 2>&1 ||
	fail "a program does not build with: cc prog.c $flags"
readelf -d "$T/prog" | grep -q 'NEEDED.*\[libfamd-client\.so\.0\]' ||
	fail "the program does not need libfamd-client.so.0"
echo "PASS: a program builds with <famd-client/famd-client.h> and pkg-config famd-client"

# names: every installed file's name, and every installed library's SONAME.
names=()
for f in "${files[@]}"; do
	names+=("${f##*/}")
	if [ -f "$root$f" ] && [ ! -L "$root$f" ] &&
		soname=$(readelf -d "$root$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p') &&
		[ -n "$soname" ]; then
		names+=("$soname")
		echo "soname: $f: $soname"
	fi
done
mapfile -t names < <(printf '%s\n' "${names[@]}" | sort -u)

command -v apt-file >/dev/null 2>&1 ||
	skip "apt-file is not installed, so Debian 12's file lists are not here (scripts/install-deps installs it and runs apt-file update)"
ls /var/lib/apt/lists/*bookworm*_Contents-* >/dev/null 2>&1 ||
	skip "no Debian 12 (bookworm) Contents index in /var/lib/apt/lists: run apt-file update as root (scripts/install-deps does; about 46 MB)"

# One pass over the index: our names, and two files the index must know
# (libgamin's, which our names once were) to be worth believing.
known='/usr/include/fam\.h /usr/lib/[^/]+/libfam\.so\.0'
re=$(printf '%s\n' "${names[@]}" | quote | paste -sd '|')
[ -n "$re" ] || exit 99
apt-file search -x "/($re|fam\\.h|libfam\\.so\\.0)(\\.gz)?\$" >"$T/hits" 2>"$T/apt-file.err"
case $? in
0 | 1) ;;
*) cat "$T/apt-file.err"; skip "apt-file search cannot read its index (see above)" ;;
esac
for k in $known; do
	grep -Eq ": $k\$" "$T/hits" ||
		skip "apt-file's index does not list $k (libgamin): not a complete Debian 12 Contents index"
done

clash=
for n in "${names[@]}"; do
	q=$(printf '%s\n' "$n" | quote)
	[ -n "$q" ] || exit 99
	hit=$(grep -E "/$q(\\.gz)?\$" "$T/hits")
	if [ -n "$hit" ]; then
		echo "$hit" | sed "s|^|clash: $n: |"
		clash="$clash $n"
	fi
done
[ -z "$clash" ] || fail "installed names also in Debian 12 packages:$clash"
echo "PASS: none of ${#names[@]} installed names or SONAMEs is a file of a Debian 12 package"
