/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-ec.h - the Reed-Solomon codec of redundancy = ec:K+M (host-ec.c),
 * on ISA-L: a chunk as K data fragments and M parity fragments, each with
 * its CRC32C, and the chunk again from any K of them.
 */
#ifndef FAMD_HOST_EC_H
#define FAMD_HOST_EC_H

#include <stddef.h>
#include <stdint.h>

#define HOST_EC_MAX_K 16u  /* most data fragments */
#define HOST_EC_MAX_M 16u  /* most parity fragments */
#define HOST_EC_MAX (HOST_EC_MAX_K + HOST_EC_MAX_M)
#define HOST_EC_ALIGN 4096u /* a fragment's size is a multiple of this */

/* A chunk's code: K + M fragments of frag bytes. */
struct host_ec_codec {
	unsigned k, m;
	uint32_t chunk;   /* bytes of a chunk */
	uint32_t frag;    /* bytes of a fragment: chunk / k, rounded up to
	                   * HOST_EC_ALIGN (the last data fragment padded
	                   * with zeros) */
	unsigned char *matrix; /* (k + m) x k Cauchy matrix, its top k x k
	                        * the identity */
	unsigned char *tables; /* ISA-L's tables of the m parity rows */
};

int host_ec_codec_init(struct host_ec_codec *ec, unsigned k, unsigned m,
    uint32_t chunk);
void host_ec_codec_fini(struct host_ec_codec *ec);
uint32_t host_ec_data_len(const struct host_ec_codec *ec, unsigned i);
void host_ec_encode(const struct host_ec_codec *ec, const uint8_t *chunk,
    uint8_t *pad, uint8_t *parity, const uint8_t *frag[], uint32_t crc[]);
int host_ec_decode(const struct host_ec_codec *ec, uint8_t *const frag[],
    const uint32_t crc[], uint8_t *chunk, uint8_t *scratch, uint32_t *bad);

#endif
