#!/bin/bash
# layers.sh - every #include under src/ goes down the layers of README.md's
# "Layout" (scripts/check-layers).
exec bash "$top_srcdir/scripts/check-layers" "$top_srcdir/src"
