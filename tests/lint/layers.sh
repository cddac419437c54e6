#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# layers.sh - every #include under src/ goes down the layers of README.md's
# "Layout" (scripts/check-layers).
exec bash "$top_srcdir/scripts/check-layers" "$top_srcdir/src"
