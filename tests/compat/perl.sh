#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Perl under FAM_HEAP=all: an array of 6 million scalars (many small
# objects, all in fabric-attached memory) built, sorted numerically and
# summed.
. "$(dirname "$0")/lib-compat.sh"
compat_need perl:perl

compat_run "perl array (FAM_HEAP=all)" FAM_HEAP=all -- perl -e '
my @a; my $x = 1;
for (1 .. 6_000_000) { $x = ($x * 48271) % 2147483647; push @a, $x; }
my @s = sort { $a <=> $b } @a;
my $t = 0; $t += $_ for @s[0 .. 999];
print scalar(@s), " $s[0] $s[-1] $t\n";'
