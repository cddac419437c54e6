#!/bin/bash
# libfamshim.so exports the malloc family and fam_advise (so that a program
# under it can pass hints), and nothing else, needs neither
# libfam.so nor a sanitizer runtime (it is preloaded alone); libfam.so
# exports the fam.h API and nothing else, and installs its header and
# pkg-config file.
. "$(dirname "$0")/lib.sh"
require_cmd nm readelf

SHIM=$top_builddir/src/.libs/libfamshim.so
LIBFAM=$top_builddir/src/.libs/libfam.so
[ -f "$SHIM" ] || fail "no $SHIM"
[ -f "$LIBFAM" ] || fail "no $LIBFAM"

# exports FILE: the defined dynamic symbols, version suffixes dropped.
exports() {
	nm -D --defined-only "$1" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' |
		sort | tr '\n' ' ' | sed 's/ $//'
}

want="aligned_alloc calloc fam_advise free malloc malloc_usable_size memalign posix_memalign pvalloc realloc reallocarray valloc"
got=$(exports "$SHIM")
[ "$got" = "$want" ] || fail "libfamshim.so exports [$got], not [$want]"
pass "libfamshim.so exports only the malloc family and fam_advise"

needed=$(readelf -d "$SHIM" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case " $needed" in
*libfam.so*) fail "libfamshim.so needs libfam.so: $needed" ;;
*asan* | *ubsan*) fail "libfamshim.so needs a sanitizer runtime: $needed" ;;
esac
pass "libfamshim.so stands alone (needs: $needed)"

want="fam_advise fam_alloc fam_alloc_file fam_free fam_owns fam_stat fam_usable_size"
got=$(exports "$LIBFAM")
[ "$got" = "$want" ] || fail "libfam.so exports [$got], not [$want]"
nm -D --defined-only "$LIBFAM" | grep -q ' fam_alloc@@FAM_1$' ||
	fail "libfam.so's symbols are not versioned FAM_1"
pass "libfam.so exports only the fam.h API, versioned FAM_1"

grep -q '^Libs: -L${libdir} -lfam$' "$top_builddir/src/client/libfam.pc" ||
	fail "libfam.pc has no Libs line for -lfam"
pass "libfam.pc generated"
