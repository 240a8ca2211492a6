/*
 * The codebook formats' lattices as the quantizers search them.
 *
 * A group of 8 (IQ1/IQ2) or 4 (IQ3) weights is stored as the index of one
 * lattice point.  The quantizer rounds each weight to a level l (0..2 for
 * IQ1/IQ2, 0..7 for IQ3) and looks the levels up: the key packs them
 * (2 or 3 bits each, first element lowest); a key that is a lattice point
 * gives its index, any other gives the list of lattice points nearest to
 * it (the points at the nearest few distinct squared distances, nearest
 * first, lower index first on ties), among which the quantizer picks the
 * best under its own weighted error.  The lists are ggml's
 * (iq2xs_init_impl / iq3xs_init_impl), which fixes the bytes written.
 *
 * Built once per lattice on first use (thread-safe) from the dequantizers'
 * grids in iq_tables.c, and kept for the life of the process.
 */
#ifndef PLM_QUANT_IQ_LATTICE_H
#define PLM_QUANT_IQ_LATTICE_H

#include <stdint.h>

#include "quant/types.h"

typedef struct {
    int n_points;             /* lattice points (grid entries) */
    int group;                /* weights per point: 8 or 4 */
    int key_bits;             /* bits per level in a key: 2 or 3 */
    const int8_t *odd;        /* group values 2l+1 per point, as ggml's search uses them */
    const int32_t *map;       /* key -> point index >= 0, or -(offset + 1) into near */
    const uint16_t *near;     /* at an offset: count, then that many point indices */
} plm_iq_lattice;

/* The lattice a type searches (IQ2_XXS/XS/S, IQ3_XXS/S, IQ1_S/M share
 * one), or NULL for any other type or when memory runs out. */
const plm_iq_lattice *plm_iq_lattice_of(plm_type type);

/* The candidate list of a key that is not a lattice point: near[0] is the
 * count, near[1..count] the point indices. */
static inline const uint16_t *plm_iq_lattice_near(const plm_iq_lattice *lat, int key) {
    return lat->near - lat->map[key] - 1;
}

#endif
