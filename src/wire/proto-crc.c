/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proto-crc.c - CRC32C (Castagnoli, the polynomial of iSCSI and ext4) of
 * chunk data on the wire (proto.h, the header's crc).
 *
 * Owns: a table for any CPU, and the SSE4.2 crc32 instruction on x86-64
 * where the CPU has it (chosen once): three streams at a time over long
 * buffers (the instruction's latency is three cycles, its throughput one
 * a cycle), joined with tables that shift a CRC over CRC_LONG or
 * CRC_SHORT bytes of zeros. No state but the tables; no locks: they are
 * built before main() runs.
 */
#include "config.h"

#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "wire/proto.h"

#define CRC32C_POLY 0x82f63b78u /* reflected */
#define CRC_LONG    8192u /* bytes a stream takes in a long step */
#define CRC_SHORT   256u  /* ... in a short step */

static uint32_t crc32c_table[8][256];
static bool crc32c_hw;
#if defined(__x86_64__)
static uint32_t crc32c_long[4][256];  /* shift over CRC_LONG zeros */
static uint32_t crc32c_short[4][256]; /* shift over CRC_SHORT zeros */
#endif

#if defined(__x86_64__)
/*
 * Builds the table that shifts a CRC (not inverted) over len bytes of
 * zeros (a multiple of 8): the shift is linear, so each entry is the XOR
 * of the shifted bits of its byte.
 */
__attribute__((target("sse4.2"))) static void
crc32c_shift_init(uint32_t table[4][256], unsigned len)
{
	uint32_t bit[32];

	for (unsigned i = 0; i < 32; i++) {
		uint64_t c = (uint64_t)1 << i;

		for (unsigned k = 0; k < len / 8; k++)
			c = __builtin_ia32_crc32di(c, 0);
		bit[i] = (uint32_t)c;
	}
	for (unsigned b = 0; b < 4; b++)
		for (unsigned v = 0; v < 256; v++) {
			uint32_t x = 0;

			for (unsigned i = 0; i < 8; i++)
				if (v & (1u << i))
					x ^= bit[8 * b + i];
			table[b][v] = x;
		}
}

/* Shifts crc (not inverted) over the zeros table was built for. */
static inline uint32_t
crc32c_shift(const uint32_t table[4][256], uint32_t crc)
{
	return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^
	    table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}
#endif

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
	if (crc32c_hw) {
		crc32c_shift_init(crc32c_long, CRC_LONG);
		crc32c_shift_init(crc32c_short, CRC_SHORT);
	}
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
/*
 * Runs three streams of step bytes each (a multiple of 8) through the
 * instruction while len allows, joined with table; returns the CRC.
 */
__attribute__((target("sse4.2"))) static inline uint64_t
crc32c_hw_3way(uint64_t c0, const uint8_t **pp, size_t *lenp, size_t step,
    const uint32_t table[4][256])
{
	const uint8_t *p = *pp;
	size_t len = *lenp;

	while (len >= 3 * step) {
		uint64_t c1 = 0, c2 = 0;

		for (const uint8_t *end = p + step; p < end; p += 8) {
			uint64_t v0, v1, v2;

			memcpy(&v0, p, 8);
			memcpy(&v1, p + step, 8);
			memcpy(&v2, p + 2 * step, 8);
			c0 = __builtin_ia32_crc32di(c0, v0);
			c1 = __builtin_ia32_crc32di(c1, v1);
			c2 = __builtin_ia32_crc32di(c2, v2);
		}
		c0 = crc32c_shift(table, (uint32_t)c0) ^ c1;
		c0 = crc32c_shift(table, (uint32_t)c0) ^ c2;
		p += 2 * step;
		len -= 3 * step;
	}
	*pp = p;
	*lenp = len;
	return c0;
}

/* CRC32C with the SSE4.2 instruction (crc not inverted here). */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw_run(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;

	c = crc32c_hw_3way(c, &p, &len, CRC_LONG, crc32c_long);
	c = crc32c_hw_3way(c, &p, &len, CRC_SHORT, crc32c_short);
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
