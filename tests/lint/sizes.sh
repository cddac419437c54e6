#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# sizes.sh - no source file under src/ over 1,200 lines, no function over
# 120 (scripts/check-size).
exec bash "$top_srcdir/scripts/check-size" "$top_srcdir/src"
