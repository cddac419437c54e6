/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proto-crc.c - CRC32C (Castagnoli, the polynomial of iSCSI and ext4) of
 * chunk data on the wire (proto.h, the header's crc).
 *
 * Owns: a table for any CPU, and the SSE4.2 crc32 instruction on x86-64
 * where the CPU has it (chosen once). No state but the table; no locks:
 * it is built before main() runs.
 */
#include "config.h"

#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "wire/proto.h"

#define CRC32C_POLY 0x82f63b78u /* reflected */

static uint32_t crc32c_table[8][256];
static bool crc32c_hw;

/* Builds the slicing-by-8 tables and picks the instruction if there is. */
__attribute__((constructor)) static void
crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? c >> 1 ^ CRC32C_POLY : c >> 1;
		crc32c_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc32c_table[t][i] = crc32c_table[t - 1][i] >> 8 ^
			    crc32c_table[0][crc32c_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* CRC32C by table, eight bytes a step (crc not inverted here). */
static uint32_t
crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v = le64toh(v);
		v ^= crc;
		crc = crc32c_table[7][v & 0xff] ^
		    crc32c_table[6][(v >> 8) & 0xff] ^
		    crc32c_table[5][(v >> 16) & 0xff] ^
		    crc32c_table[4][(v >> 24) & 0xff] ^
		    crc32c_table[3][(v >> 32) & 0xff] ^
		    crc32c_table[2][(v >> 40) & 0xff] ^
		    crc32c_table[1][(v >> 48) & 0xff] ^
		    crc32c_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		crc = crc >> 8 ^ crc32c_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
/* CRC32C with the SSE4.2 instruction (crc not inverted here). */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw_run(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len-- > 0)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

/*
 * Returns the CRC32C of len bytes at p, continuing crc (0 to start):
 * proto_crc32c(0, "123456789", 9) is 0xe3069283.
 */
uint32_t
proto_crc32c(uint32_t crc, const void *p, size_t len)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (crc32c_hw)
		return ~crc32c_hw_run(crc, p, len);
#endif
	return ~crc32c_sw(crc, p, len);
}
