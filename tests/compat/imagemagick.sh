#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# ImageMagick: a 4000x4000 gradient (its pixel cache, 128 MiB at 16 bits
# per channel, within the memory limit of Debian's policy.xml) resized,
# the pixels compared. Its column pass touches a few pages of every chunk:
# the host reads by grains there (fetch = adaptive).
. "$(dirname "$0")/lib-compat.sh"
compat_need imagemagick:convert

HOST_CONF_EXTRA="fetch = adaptive"
compat_run "imagemagick convert" -- sh -c "MAGICK_THREAD_LIMIT=1 convert -size 4000x4000 gradient:white-black -resize 50% -depth 8 rgb:- | md5sum"
