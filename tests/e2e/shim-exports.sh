#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# libfamshim.so exports the malloc family, the mapping calls (mmap, munmap,
# mremap, madvise), fam_advise (so that a program under it can pass
# hints) and __register_atfork (libfam's fork handler goes first), and
# nothing else, needs neither
# libfamd-client.so nor a sanitizer runtime (it is preloaded alone);
# libfamd-client.so exports the famd-client.h API and nothing else, and
# installs its header and pkg-config file.
. "$(dirname "$0")/lib.sh"
require_cmd nm readelf

SHIM=$top_builddir/src/.libs/libfamshim.so
LIBFAM=$top_builddir/src/.libs/libfamd-client.so
[ -f "$SHIM" ] || fail "no $SHIM"
[ -f "$LIBFAM" ] || fail "no $LIBFAM"

# exports FILE: the defined dynamic symbols, version suffixes dropped.
exports() {
	nm -D --defined-only "$1" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' |
		sort | tr '\n' ' ' | sed 's/ $//'
}

want="__register_atfork aligned_alloc calloc fam_advise free madvise malloc malloc_usable_size memalign mmap mmap64 mremap munmap posix_madvise posix_memalign pvalloc realloc reallocarray valloc"
got=$(exports "$SHIM")
[ "$got" = "$want" ] || fail "libfamshim.so exports [$got], not [$want]"
pass "libfamshim.so exports only the malloc family, the mapping calls, fam_advise and __register_atfork"

needed=$(readelf -d "$SHIM" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case " $needed" in
*libfamd-client.so*) fail "libfamshim.so needs libfamd-client.so: $needed" ;;
*asan* | *ubsan*) fail "libfamshim.so needs a sanitizer runtime: $needed" ;;
esac
pass "libfamshim.so stands alone (needs: $needed)"

want="fam_advise fam_alloc fam_alloc_file fam_alloc_redundant fam_free fam_owns fam_stat fam_usable_size"
got=$(exports "$LIBFAM")
[ "$got" = "$want" ] || fail "libfamd-client.so exports [$got], not [$want]"
nm -D --defined-only "$LIBFAM" | grep -q ' fam_alloc@@FAMD_CLIENT_1$' ||
	fail "libfamd-client.so's symbols are not versioned FAMD_CLIENT_1"
nm -D --defined-only "$LIBFAM" | grep -q ' fam_alloc_redundant@@FAMD_CLIENT_1.1$' ||
	fail "fam_alloc_redundant is not versioned FAMD_CLIENT_1.1"
pass "libfamd-client.so exports only the famd-client.h API, versioned FAMD_CLIENT_1 (and 1.1: fam_alloc_redundant)"

grep -q '^Libs: -L${libdir} -lfamd-client$' "$top_builddir/src/client/famd-client.pc" ||
	fail "famd-client.pc has no Libs line for -lfamd-client"
pass "famd-client.pc generated"
