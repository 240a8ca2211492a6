/*
 * The codebook lattices' search tables (see iq_lattice.h): the levels of
 * every point, the key -> point map, and each off-lattice key's list of
 * nearest points.  Derived from the dequantizers' grids, so the format's
 * tables live in one place (iq_tables.c).
 */
#include "quant/iq_lattice.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "quant/iq_tables.h"

enum { LAT_IQ2_XXS, LAT_IQ2_XS, LAT_IQ2_S, LAT_IQ1, LAT_IQ3_XXS, LAT_IQ3_S, LAT_COUNT };

typedef struct {
    const uint64_t *grid8;  /* 8-wide grids (IQ1/IQ2), or NULL */
    const uint32_t *grid4;  /* 4-wide grids (IQ3) */
    int n_points;
    int n_distances;        /* how many nearest distinct distances a list holds (ggml's nwant) */
} lattice_def;

static const lattice_def defs[LAT_COUNT] = {
    [LAT_IQ2_XXS] = {plm_iq2xxs_grid, NULL, 256, 2},
    [LAT_IQ2_XS] = {plm_iq2xs_grid, NULL, 512, 2},
    [LAT_IQ2_S] = {plm_iq2s_grid, NULL, 1024, 1},
    [LAT_IQ1] = {plm_iq1s_grid, NULL, 2048, 3},
    [LAT_IQ3_XXS] = {NULL, plm_iq3xxs_grid, 256, 2},
    [LAT_IQ3_S] = {NULL, plm_iq3s_grid, 512, 3},
};

static plm_iq_lattice lattices[LAT_COUNT];
static bool built[LAT_COUNT];
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

/* Element k of point p as a signed byte (IQ1's grid holds -1, 0, 1). */
static int grid_value(const lattice_def *def, int p, int k) {
    const uint64_t word = def->grid8 ? def->grid8[p] : def->grid4[p];
    return (int8_t)(word >> (8 * k));
}

/* The level of every point's elements: the rank of its value among the
 * grid's distinct values (ggml's lattices use every level). Returns the
 * number of levels, or 0 when memory runs out. */
static int rank_levels(const lattice_def *def, int group, int8_t *odd) {
    int values[16], n_values = 0;
    for (int p = 0; p < def->n_points; p++)
        for (int k = 0; k < group; k++) {
            const int v = grid_value(def, p, k);
            int i = 0;
            while (i < n_values && values[i] < v) i++;
            if (i < n_values && values[i] == v) continue;
            if (n_values == 16) return 0;
            memmove(values + i + 1, values + i, sizeof(int) * (size_t)(n_values - i));
            values[i] = v;
            n_values++;
        }
    for (int p = 0; p < def->n_points; p++)
        for (int k = 0; k < group; k++) {
            int rank = 0;
            while (values[rank] != grid_value(def, p, k)) rank++;
            odd[p * group + k] = (int8_t)(2 * rank + 1);
        }
    return n_values;
}

typedef struct {
    uint16_t *items;
    size_t count, capacity;
} u16_list;

static bool push(u16_list *l, uint16_t v) {
    if (l->count == l->capacity) {
        const size_t cap = l->capacity ? 2 * l->capacity : 4096;
        uint16_t *grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) return false;
        l->items = grown;
        l->capacity = cap;
    }
    l->items[l->count++] = v;
    return true;
}

/* Appends the list of key's nearest points: every point whose squared
 * distance is among the n_distances smallest distinct ones, by distance
 * and then index (what sorting (distance, index) pairs gives). */
static bool add_near_list(const lattice_def *def, const plm_iq_lattice *lat, const int8_t *levels, int *d2,
                          u16_list *near) {
    enum { MAX_DISTANCES = 4 };
    int nearest[MAX_DISTANCES], n_have = 0;
    for (int p = 0; p < lat->n_points; p++) {
        int d = 0;
        for (int k = 0; k < lat->group; k++) {
            const int diff = lat->odd[p * lat->group + k] - levels[k];
            d += diff * diff;
        }
        d2[p] = d;
        int i = 0;
        while (i < n_have && nearest[i] < d) i++;
        if (i < n_have && nearest[i] == d) continue;
        if (i == def->n_distances) continue;
        if (n_have < def->n_distances) n_have++;
        memmove(nearest + i + 1, nearest + i, sizeof(int) * (size_t)(n_have - 1 - i));
        nearest[i] = d;
    }
    const size_t start = near->count;
    if (!push(near, 0)) return false;
    for (int i = 0; i < n_have; i++)
        for (int p = 0; p < lat->n_points; p++)
            if (d2[p] == nearest[i] && !push(near, (uint16_t)p)) return false;
    near->items[start] = (uint16_t)(near->count - start - 1);
    return true;
}

static bool build(int which) {
    const lattice_def *def = &defs[which];
    plm_iq_lattice *lat = &lattices[which];
    lat->n_points = def->n_points;
    lat->group = def->grid8 ? 8 : 4;
    lat->key_bits = def->grid8 ? 2 : 3;
    const int n_keys = 1 << (lat->key_bits * lat->group);
    int8_t *odd = malloc((size_t)def->n_points * (size_t)lat->group);
    int32_t *map = malloc(sizeof(int32_t) * (size_t)n_keys);
    int *d2 = malloc(sizeof(int) * (size_t)def->n_points);
    u16_list near = {0};
    bool ok = odd && map && d2;
    lat->odd = odd;
    const int n_levels = ok ? rank_levels(def, lat->group, odd) : 0;
    ok = ok && n_levels > 0 && n_levels <= (1 << lat->key_bits);
    if (ok) {
        /* keys with a level the search never produces (IQ1/IQ2's 3) stay unmapped */
        for (int key = 0; key < n_keys; key++) map[key] = INT32_MIN;
        for (int p = 0; p < def->n_points; p++) {
            int key = 0;
            for (int k = 0; k < lat->group; k++) key |= (odd[p * lat->group + k] - 1) / 2 << (lat->key_bits * k);
            map[key] = p;
        }
    }
    const int mask = (1 << lat->key_bits) - 1;
    for (int key = 0; ok && key < n_keys; key++) {
        if (map[key] >= 0) continue;
        int8_t odd_levels[8];
        bool searched = true;
        for (int k = 0; k < lat->group; k++) {
            const int l = key >> (lat->key_bits * k) & mask;
            searched = searched && l < n_levels;
            odd_levels[k] = (int8_t)(2 * l + 1);
        }
        if (!searched) continue;
        map[key] = -(int32_t)near.count - 1;
        ok = add_near_list(def, lat, odd_levels, d2, &near);
    }
    free(d2);
    if (!ok) {
        free(odd);
        free(map);
        free(near.items);
        return false;
    }
    lat->map = map;
    lat->near = near.items;
    return true;
}

const plm_iq_lattice *plm_iq_lattice_of(plm_type type) {
    int which;
    switch (type) {
    case PLM_TYPE_IQ2_XXS: which = LAT_IQ2_XXS; break;
    case PLM_TYPE_IQ2_XS: which = LAT_IQ2_XS; break;
    case PLM_TYPE_IQ2_S: which = LAT_IQ2_S; break;
    case PLM_TYPE_IQ1_S:
    case PLM_TYPE_IQ1_M: which = LAT_IQ1; break;
    case PLM_TYPE_IQ3_XXS: which = LAT_IQ3_XXS; break;
    case PLM_TYPE_IQ3_S: which = LAT_IQ3_S; break;
    default: return NULL;
    }
    pthread_mutex_lock(&build_lock);
    if (!built[which]) built[which] = build(which);
    pthread_mutex_unlock(&build_lock);
    return built[which] ? &lattices[which] : NULL;
}
