#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A JVM (OpenJDK) with -Xmx three times the host buffer: its heap is a
# reservation it maps itself (mmap, not malloc) and commits as it grows.
# The program fills and sorts 40 million longs (320 MiB) on the heap.
. "$(dirname "$0")/lib-compat.sh"
compat_need openjdk-17-jre-headless:java

cat >"$T/Sort.java" <<'JAVA'
public class Sort {
	public static void main(String[] args) {
		int n = 40_000_000;
		long[] a = new long[n];
		long x = 1;
		for (int i = 0; i < n; i++) { x = (x * 48271) % 2147483647; a[i] = x; }
		java.util.Arrays.sort(a);
		long s = 0;
		for (int i = 0; i < n; i += 1000) s += a[i];
		System.out.println(a[0] + " " + a[n - 1] + " " + s);
	}
}
JAVA
compat_run "java -Xmx1g" -- java -Xmx1g -XX:+UseSerialGC -Xshare:off "$T/Sort.java"
