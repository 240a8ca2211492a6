/*
 * The lattices and sign table of the IQ1/IQ2/IQ3 formats (iq_tables.c).
 * Entry i of a grid holds the 8 (IQ2, IQ1) or 4 (IQ3) magnitudes of lattice
 * point i, one byte each, first element in the lowest byte; IQ1's bytes are
 * signed (-1, 0, 1).
 */
#ifndef PLM_QUANT_IQ_TABLES_H
#define PLM_QUANT_IQ_TABLES_H

#include <stdint.h>

extern const uint8_t plm_iq2_signs[128];     /* 7 sign bits -> 8, even parity */
extern const uint64_t plm_iq2_sign_masks[128]; /* the same as bytes: 0xff = negative */
extern const uint64_t plm_iq2xxs_grid[256];  /* values 8, 25, 43 */
extern const uint64_t plm_iq2xs_grid[512];
extern const uint64_t plm_iq2s_grid[1024];
extern const uint32_t plm_iq3xxs_grid[256];  /* values 4..62 */
extern const uint32_t plm_iq3s_grid[512];    /* values 1..15 */
extern const uint64_t plm_iq1s_grid[2048];   /* values -1, 0, 1 */

#endif
