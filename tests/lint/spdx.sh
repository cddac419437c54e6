#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# spdx.sh - every source and script file names its licence in an
# SPDX-License-Identifier line among its first (scripts/add-spdx --check
# lists those without one; scripts/add-spdx adds it).
missing=$(bash "$top_srcdir/scripts/add-spdx" --check "$top_srcdir")
case $? in
0) exit 0 ;;
1)
	echo "files without an SPDX-License-Identifier line (scripts/add-spdx adds it):"
	echo "$missing"
	exit 1
	;;
*) exit 99 ;;
esac
