/*
 * llama-quantize's per-tensor type rules for its mixtures — K-quants, IQ4,
 * and the codebook (IQ1/IQ2/IQ3), ternary and MXFP4_MOE file types —
 * (llama_tensor_get_type in llama.cpp's src/llama-quant.cpp), for dense
 * and Mixture-of-Experts models (3-D expert tensors are quantized row by
 * row like matrices; the router, ffn_gate_inp, is never converted; an
 * 8-expert model gets Mixtral's rules for attn_k/v/output).  Checked against the fixtures (llama.cpp of February 2025) and
 * against the llama.cpp node-llama-cpp ships (bench/quantize-vs-llamacpp.sh);
 * where the two versions differ — Q2_K/Q3_K's fallback for short rows —
 * this follows the newer.
 *
 * The mixtures spend extra bits where quantization hurts most: the output
 * matrix (Q6_K), attn_v (few rows per layer: cheap to widen) and ffn_down in
 * a spread of layers chosen by use_more_bits (the first and last eighth,
 * and every third layer between).  llama.cpp counts attn_v and ffn_down
 * tensors in the order it visits them: sorted by layer number, then by name.
 * That order is replayed here, so the counters — and the types — are
 * llama.cpp's whatever order the tensors have in the input file.
 */
#include "model/quantize_rules.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "quant/quant.h"

/* Matrices and 3-D expert tensors, but not a MoE router (ffn_gate_inp),
 * which llama.cpp never converts. */
bool plm_is_weight_matrix(const plm_gguf_tensor *t) {
    const char *suffix = ".weight", *router = "ffn_gate_inp.weight";
    const size_t n = strlen(suffix), nr = strlen(router);
    if (t->name.len >= nr && !memcmp(t->name.ptr + t->name.len - nr, router, nr)) return false;
    return (t->n_dims == 2 || t->n_dims == 3) && t->name.len > n && !memcmp(t->name.ptr + t->name.len - n, suffix, n);
}

/* What llama.cpp knows about the model when choosing types. */
typedef struct mix_state {
    uint32_t ftype;
    bool falcon, is_70b, has_output, has_imatrix;
    int n_expert;     /* MoE: expert_count (8: llama.cpp's Mixtral-8x7B rules) */
    int output_type;  /* --output-tensor-type, -1 none: also for a tied token_embd */
    int n_gqa, n_layer, n_attention_wv;
    int i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;  /* visited so far */
} mix_state;

/* The layers that get more bits: the first and last eighth, and every third
 * one between. */
static bool use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

static bool contains(const char *name, const char *part) { return strstr(name, part) != NULL; }

/* The file types below 3 bits whose rules differ most (llama.cpp's
 * IQ2_XXS/IQ2_XS/IQ1_S/IQ2_S/IQ2_M/IQ1_M branch). */
static bool below_3_bits(uint32_t ftype) {
    return ftype == PLM_FTYPE_IQ2_XXS || ftype == PLM_FTYPE_IQ2_XS || ftype == PLM_FTYPE_IQ1_S ||
           ftype == PLM_FTYPE_IQ2_S || ftype == PLM_FTYPE_IQ2_M || ftype == PLM_FTYPE_IQ1_M;
}

/* IQ2_S and IQ2_M raise their sensitive tensors to IQ3_S, the others to Q2_K. */
static plm_type iq2_raised(uint32_t ftype) {
    return ftype == PLM_FTYPE_IQ2_S || ftype == PLM_FTYPE_IQ2_M ? PLM_TYPE_IQ3_S : PLM_TYPE_Q2_K;
}

static plm_type output_type(const mix_state *s, const plm_gguf_tensor *t, plm_type type) {
    if (s->ftype == PLM_FTYPE_MXFP4_MOE) return PLM_TYPE_Q8_0;
    if (s->falcon || plm_row_size(type, (int64_t)t->ne[0]) == 0) return PLM_TYPE_Q8_0;
    if (below_3_bits(s->ftype) || s->ftype == PLM_FTYPE_IQ3_XXS) return PLM_TYPE_Q5_K;
    return type != PLM_TYPE_Q8_0 ? PLM_TYPE_Q6_K : type;
}

/* token_embd (untied): a lookup table, so only the smallest types raise it. */
static plm_type token_embd_type(const mix_state *s, plm_type type) {
    switch (s->ftype) {
    case PLM_FTYPE_IQ2_XXS:
    case PLM_FTYPE_IQ2_XS:
    case PLM_FTYPE_IQ1_S:
    case PLM_FTYPE_IQ1_M: return PLM_TYPE_Q2_K;
    case PLM_FTYPE_IQ2_S:
    case PLM_FTYPE_IQ2_M:
    case PLM_FTYPE_IQ3_XXS: return PLM_TYPE_IQ3_S;
    case PLM_FTYPE_TQ1_0:
    case PLM_FTYPE_TQ2_0: return PLM_TYPE_Q4_K;
    default: return type;
    }
}

/* The IQ1/IQ2 file types: attn_v, the first eighth of ffn_down (counted in
 * visiting order, also in MoE models) and attn_output get more bits; the
 * K-quants' rules do not apply. */
static plm_type below_3_bits_type(mix_state *s, const char *name, plm_type type) {
    if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight")) {
        s->i_attention_wv++;
        return s->n_gqa >= 4 || s->n_expert >= 4 ? PLM_TYPE_Q4_K : iq2_raised(s->ftype);
    }
    if (contains(name, "attn_k.weight")) return s->n_expert == 8 ? PLM_TYPE_Q4_K : type;
    if (contains(name, "attn_q.weight")) return type;
    if (contains(name, "attn_output.weight")) {
        if (s->n_expert == 8) return PLM_TYPE_Q5_K;
        if (s->ftype == PLM_FTYPE_IQ1_S || s->ftype == PLM_FTYPE_IQ1_M) return PLM_TYPE_IQ2_XXS;
        return s->ftype == PLM_FTYPE_IQ2_S || s->ftype == PLM_FTYPE_IQ2_M ? PLM_TYPE_IQ3_S : type;
    }
    if (contains(name, "ffn_up") || contains(name, "ffn_gate")) return type;
    if (contains(name, "ffn_down")) return s->i_ffn_down++ < s->n_layer / 8 ? iq2_raised(s->ftype) : type;
    return type;
}

static plm_type attn_v_type(mix_state *s, plm_type type) {
    const int i = s->i_attention_wv++;
    switch (s->ftype) {
    case PLM_FTYPE_Q2_K: type = s->n_gqa >= 4 ? PLM_TYPE_Q4_K : PLM_TYPE_Q3_K; break;
    case PLM_FTYPE_IQ3_XXS:
        type = s->n_gqa >= 4 ? PLM_TYPE_Q4_K : !s->has_imatrix ? PLM_TYPE_IQ3_S : PLM_TYPE_IQ3_XXS;
        break;
    case PLM_FTYPE_IQ3_XS:
    case PLM_FTYPE_IQ3_S:
        if (s->n_gqa >= 4) type = PLM_TYPE_Q4_K;
        break;
    case PLM_FTYPE_IQ3_M: type = PLM_TYPE_Q4_K; break;
    case PLM_FTYPE_Q3_K_M: type = i < 2 ? PLM_TYPE_Q5_K : PLM_TYPE_Q4_K; break;
    case PLM_FTYPE_Q3_K_L: type = PLM_TYPE_Q5_K; break;
    case PLM_FTYPE_Q4_K_M:
    case PLM_FTYPE_Q5_K_M:
        if (use_more_bits(i, s->n_attention_wv)) type = PLM_TYPE_Q6_K;
        break;
    case PLM_FTYPE_Q4_K_S:
        if (i < 4) type = PLM_TYPE_Q5_K;
        break;
    case PLM_FTYPE_IQ4_NL:
    case PLM_FTYPE_IQ4_XS:
        if (s->n_gqa >= 4) type = PLM_TYPE_Q5_K;
        break;
    default: break;
    }
    /* 70B: 8 query heads share each V head, so attn_v is 8x smaller than
     * attn_q and more bits there cost almost nothing */
    if (s->is_70b && (type == PLM_TYPE_Q3_K || type == PLM_TYPE_Q4_K)) type = PLM_TYPE_Q5_K;
    /* 8 experts: attention is a small part of the model, Q8_0 costs little */
    if (s->n_expert == 8) type = PLM_TYPE_Q8_0;
    return type;
}

/* The layer of an ffn_down: llama.cpp counts them in a dense model, and
 * reads it from the name in a MoE one (Mixtral's were not in layer order). */
static plm_type ffn_down_type(mix_state *s, const char *name, plm_type type) {
    int i = s->i_ffn_down++;
    const int n = s->n_layer;
    if (s->n_expert > 1 && sscanf(name, "blk.%d.", &i) != 1) i = 0;
    switch (s->ftype) {
    case PLM_FTYPE_Q2_K: return PLM_TYPE_Q3_K;
    case PLM_FTYPE_IQ3_XXS:
        if (s->has_imatrix) return type;
        return i < n / 8 ? PLM_TYPE_Q4_K : PLM_TYPE_Q3_K;
    case PLM_FTYPE_IQ3_M:
        return i < n / 8 || (s->n_expert == 8 && use_more_bits(i, n)) ? PLM_TYPE_Q4_K : type;
    case PLM_FTYPE_Q3_K_M:
        if (i < n / 16) return PLM_TYPE_Q5_K;
        return !s->falcon || use_more_bits(i, n) ? PLM_TYPE_Q4_K : PLM_TYPE_Q3_K;
    case PLM_FTYPE_Q3_K_L: return s->falcon ? PLM_TYPE_Q4_K : PLM_TYPE_Q5_K;
    case PLM_FTYPE_Q4_K_M:
        if (s->falcon) return i < n / 16 ? PLM_TYPE_Q6_K : use_more_bits(i, n) ? PLM_TYPE_Q5_K : PLM_TYPE_Q4_K;
        return use_more_bits(i, n) ? PLM_TYPE_Q6_K : type;
    case PLM_FTYPE_Q5_K_M: return use_more_bits(i, n) ? PLM_TYPE_Q6_K : type;
    case PLM_FTYPE_Q4_K_S: return !s->falcon && i < n / 8 ? PLM_TYPE_Q5_K : type;
    /* the 4-bit non-K types guard the first ffn_down layers: with more bits
     * without an imatrix, with the asymmetric twin with one */
    case PLM_FTYPE_IQ4_NL:
    case PLM_FTYPE_IQ4_XS: return i < n / 8 && !s->has_imatrix ? PLM_TYPE_Q5_K : type;
    case PLM_FTYPE_Q4_0: return i < n / 8 && s->has_imatrix ? PLM_TYPE_Q4_1 : type;
    case PLM_FTYPE_Q5_0: return i < n / 8 && s->has_imatrix ? PLM_TYPE_Q5_1 : type;
    default: return type;
    }
}

static plm_type attn_output_type(const mix_state *s, plm_type type) {
    if (s->falcon) return s->ftype == PLM_FTYPE_Q3_K_L ? PLM_TYPE_Q4_K : type;
    if (s->n_expert == 8) {
        switch (s->ftype) {
        case PLM_FTYPE_Q2_K:
        case PLM_FTYPE_Q3_K_S:
        case PLM_FTYPE_Q3_K_M:
        case PLM_FTYPE_Q4_K_S:
        case PLM_FTYPE_Q4_K_M:
        case PLM_FTYPE_IQ3_XS:
        case PLM_FTYPE_IQ3_XXS:
        case PLM_FTYPE_IQ3_S:
        case PLM_FTYPE_IQ3_M:
        case PLM_FTYPE_IQ4_NL:
        case PLM_FTYPE_IQ4_XS: return PLM_TYPE_Q5_K;
        default: return type;
        }
    }
    switch (s->ftype) {
    case PLM_FTYPE_Q2_K: return PLM_TYPE_Q3_K;
    case PLM_FTYPE_IQ3_XXS: return PLM_TYPE_IQ3_S;
    case PLM_FTYPE_IQ3_M: return PLM_TYPE_Q4_K;
    case PLM_FTYPE_Q3_K_M: return PLM_TYPE_Q4_K;
    case PLM_FTYPE_Q3_K_L: return PLM_TYPE_Q5_K;
    default: return type;
    }
}

static plm_type attn_qkv_type(const mix_state *s, plm_type type) {
    switch (s->ftype) {
    case PLM_FTYPE_Q3_K_M:
    case PLM_FTYPE_Q3_K_L:
    case PLM_FTYPE_IQ3_M: return PLM_TYPE_Q4_K;
    case PLM_FTYPE_Q4_K_M: return PLM_TYPE_Q5_K;
    case PLM_FTYPE_Q5_K_M: return PLM_TYPE_Q6_K;
    default: return type;
    }
}

/* IQ3_XS's ffn_gate and ffn_up outside the first and last eighth of the
 * layers drop to IQ3_XXS (the layer counted, or read from a MoE name). */
static plm_type ffn_gate_up_type(mix_state *s, const char *name, int *counter, plm_type type) {
    int i = (*counter)++;
    const int n = s->n_layer;
    if (s->n_expert > 1 && sscanf(name, "blk.%d.", &i) != 1) i = 0;
    return s->ftype == PLM_FTYPE_IQ3_XS && i >= n / 8 && i < 7 * n / 8 ? PLM_TYPE_IQ3_XXS : type;
}

/* attn_q and attn_k of the 3-bit IQ types drop a step: they matter less. */
static plm_type attn_q_k_type(const mix_state *s, plm_type type) {
    if (s->ftype == PLM_FTYPE_IQ3_XS) return PLM_TYPE_IQ3_XXS;
    if (s->ftype == PLM_FTYPE_IQ3_XXS) return PLM_TYPE_IQ2_S;
    return type;
}

/* A row that is not whole blocks of the chosen type falls back to a
 * 32-element format of similar size, or F16 if even that does not fit.
 * (Q2_K and Q3_K fell back to IQ4_NL in llama.cpp until 2025; current
 * llama.cpp, the one the oracle tests run, uses Q4_0.) */
static plm_type fallback_type(const plm_gguf_tensor *t, plm_type type) {
    if (plm_row_size(type, (int64_t)t->ne[0]) != 0) return type;
    switch (type) {
    case PLM_TYPE_Q2_K:
    case PLM_TYPE_Q3_K: type = PLM_TYPE_Q4_0; break;
    case PLM_TYPE_Q4_K: type = PLM_TYPE_Q5_0; break;
    case PLM_TYPE_Q5_K: type = PLM_TYPE_Q5_1; break;
    case PLM_TYPE_Q6_K: type = PLM_TYPE_Q8_0; break;
    case PLM_TYPE_IQ1_S:
    case PLM_TYPE_IQ1_M:
    case PLM_TYPE_IQ2_XXS:
    case PLM_TYPE_IQ2_XS:
    case PLM_TYPE_IQ2_S:
    case PLM_TYPE_IQ3_XXS:
    case PLM_TYPE_IQ3_S:
    case PLM_TYPE_IQ4_XS: type = PLM_TYPE_IQ4_NL; break;
    case PLM_TYPE_TQ1_0:
    case PLM_TYPE_TQ2_0: type = PLM_TYPE_Q4_0; break;
    default: break;
    }
    return plm_row_size(type, (int64_t)t->ne[0]) != 0 ? type : PLM_TYPE_F16;
}

/* llama_tensor_get_type for one weight matrix, in visiting order. */
static plm_type mixture_type(mix_state *s, const plm_gguf_tensor *t, const char *name, plm_type type) {
    if (!strcmp(name, "output.weight") || (!s->has_output && !strcmp(name, "token_embd.weight")))
        type = s->output_type >= 0 ? (plm_type)s->output_type : output_type(s, t, type);
    else if (s->ftype == PLM_FTYPE_MXFP4_MOE)
        type = t->n_dims == 3 && t->ne[2] > 1 ? PLM_TYPE_MXFP4 : PLM_TYPE_Q8_0;  /* experts MXFP4, the rest Q8_0 */
    else if (!strcmp(name, "token_embd.weight"))
        type = token_embd_type(s, type);
    else if (below_3_bits(s->ftype))
        type = below_3_bits_type(s, name, type);
    else if (contains(name, "attn_v.weight"))
        type = attn_v_type(s, type);
    else if (contains(name, "attn_k.weight"))
        type = s->n_expert == 8 ? PLM_TYPE_Q8_0 : attn_q_k_type(s, type);
    else if (contains(name, "attn_q.weight"))
        type = attn_q_k_type(s, type);
    else if (contains(name, "ffn_down"))
        type = ffn_down_type(s, name, type);
    else if (contains(name, "ffn_up"))
        type = ffn_gate_up_type(s, name, &s->i_ffn_up, type);
    else if (contains(name, "ffn_gate"))
        type = ffn_gate_up_type(s, name, &s->i_ffn_gate, type);
    else if (contains(name, "attn_output.weight"))
        type = attn_output_type(s, type);
    else if (contains(name, "attn_qkv.weight"))
        type = attn_qkv_type(s, type);
    return fallback_type(t, type);
}

bool plm_type_needs_imatrix(const char *name, plm_type type) {
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight") ||
        !strcmp(name, "output.weight"))
        return false;
    switch (type) {
    case PLM_TYPE_IQ3_XXS:
    case PLM_TYPE_IQ2_XXS:
    case PLM_TYPE_IQ2_XS:
    case PLM_TYPE_IQ2_S:
    case PLM_TYPE_IQ1_M:
    case PLM_TYPE_IQ1_S: return true;
    default: return false;
    }
}

/* ---- visiting order ------------------------------------------------------ */

typedef struct named_tensor {
    char name[256];
    int layer;  /* N of "blk.N.", -1 for the others */
    uint64_t index;
} named_tensor;

static int by_layer_then_name(const void *a, const void *b) {
    const named_tensor *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

static uint32_t arch_u32(const plm_gguf_file *in, const char *arch, const char *suffix, uint32_t fallback) {
    char key[160];
    uint32_t v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return plm_gguf_get_u32(in, key, &v) ? v : fallback;
}

/* The hyperparameters and tensor counts the rules look at, refused where
 * llama.cpp would refuse (or where its rules need what we do not do). */
static plm_status read_model(const plm_gguf_file *in, const named_tensor *list, uint64_t n, mix_state *s,
                             plm_error *err) {
    plm_gguf_str a;
    char arch[64] = "";
    if (plm_gguf_get_str(in, "general.architecture", &a)) plm_gguf_str_copy(a, arch, sizeof arch);
    const uint32_t n_layer = arch_u32(in, arch, "block_count", 0);
    if (!arch[0] || n_layer == 0 || n_layer > 100000)
        return plm_fail(err, PLM_ERR_FORMAT, "no general.architecture or %s.block_count: the mixture rules need them",
                        arch[0] ? arch : "ARCH");
    const uint32_t n_expert = arch_u32(in, arch, "expert_count", 0);
    if (n_expert > 100000) return plm_fail(err, PLM_ERR_FORMAT, "%s.expert_count=%u is not a model", arch, n_expert);
    s->n_expert = (int)n_expert;
    const uint32_t n_head = arch_u32(in, arch, "attention.head_count", 0);
    const uint32_t n_head_kv = arch_u32(in, arch, "attention.head_count_kv", n_head);
    s->falcon = !strcmp(arch, "falcon");
    s->n_layer = (int)n_layer;
    s->n_gqa = n_head_kv ? (int)(n_head / n_head_kv) : 0;
    /* llama.cpp's model size class "70B" (80 layers, grouped-query attention) */
    s->is_70b = n_layer == 80 && ((!strcmp(arch, "llama") && n_head != n_head_kv) || !strcmp(arch, "qwen2"));
    for (uint64_t i = 0; i < n; i++) {
        const char *name = list[i].name;
        if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight"))
            s->n_attention_wv++;
        else if (!strcmp(name, "output.weight"))
            s->has_output = true;
    }
    if (s->n_attention_wv != 0 && s->n_attention_wv != s->n_layer)
        return plm_fail(err, PLM_ERR_FORMAT, "%d attention V tensors for %d layers: not a model the mixture rules fit",
                        s->n_attention_wv, s->n_layer);
    return PLM_OK;
}

static plm_status list_tensors(const plm_gguf_file *in, named_tensor *list, plm_error *err) {
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const plm_gguf_tensor *t = &in->tensors[i];
        if (t->name.len >= sizeof list[i].name)
            return plm_fail(err, PLM_ERR_FORMAT, "tensor name of %llu bytes is too long",
                            (unsigned long long)t->name.len);
        plm_gguf_str_copy(t->name, list[i].name, sizeof list[i].name);
        list[i].index = i;
        if (sscanf(list[i].name, "blk.%d.", &list[i].layer) != 1) list[i].layer = -1;
    }
    qsort(list, in->n_tensors, sizeof *list, by_layer_then_name);
    return PLM_OK;
}

/* ---- llama-quantize's overrides ------------------------------------------ */

typedef struct type_pattern {
    regex_t re;
    plm_type type;
} type_pattern;

/* "REGEX=TYPE" -> pattern (the regex lowercased, as llama-quantize does). */
static plm_status parse_pattern(const char *arg, type_pattern *out, plm_error *err) {
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return plm_fail(err, PLM_ERR_INVALID_ARG, "--tensor-type '%s': expected REGEX=TYPE", arg);
    const int type = plm_type_from_name(eq + 1);
    if (type < 0 || (!plm_get_quantize((plm_type)type) && !plm_get_quantize_weighted((plm_type)type)))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "--tensor-type '%s': cannot quantize to '%s'", arg, eq + 1);
    char re[256];
    const size_t n = (size_t)(eq - arg);
    if (n >= sizeof re) return plm_fail(err, PLM_ERR_INVALID_ARG, "--tensor-type '%s': pattern too long", arg);
    for (size_t i = 0; i < n; i++) re[i] = (char)tolower((unsigned char)arg[i]);
    re[n] = 0;
    if (regcomp(&out->re, re, REG_EXTENDED | REG_NOSUB))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "--tensor-type '%s': bad regular expression '%s'", arg, re);
    out->type = (plm_type)type;
    return PLM_OK;
}

static int first_match(const type_pattern *pats, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (regexec(&pats[i].re, name, 0, NULL, 0) == 0) return i;
    return -1;
}

/* A quantized default: llama_tensor_get_type's wrapper (the rules applied
 * by mixture_type, in visiting order). */
static plm_type choose_one(mix_state *s, const plm_type_choice *c, const type_pattern *pats, const plm_gguf_tensor *t,
                           const char *name) {
    /* these two are taken as they are, without a fallback */
    if (c->token_embd_type >= 0 && !strcmp(name, "token_embd.weight")) return (plm_type)c->token_embd_type;
    if (c->output_type >= 0 && !strcmp(name, "output.weight")) return (plm_type)c->output_type;
    const int m = first_match(pats, c->n_tensor_types, name);
    if (m >= 0) return fallback_type(t, pats[m].type);
    return c->pure ? fallback_type(t, c->base) : mixture_type(s, t, name, c->base);
}

plm_status plm_choose_tensor_types(const plm_gguf_file *in, const plm_type_choice *c, uint32_t *out_type,
                                   plm_error *err) {
    const plm_type_info *bi = plm_type_info_get(c->base);
    const bool quantized = bi && bi->block_size > 1;  /* F16/BF16/F32 take every row as it is */
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const plm_gguf_tensor *t = &in->tensors[i];
        out_type[i] = !plm_is_weight_matrix(t) ? t->type : quantized ? fallback_type(t, c->base) : c->base;
    }
    if (!quantized || in->n_tensors == 0) return PLM_OK;

    named_tensor *list = malloc(in->n_tensors * sizeof *list);
    type_pattern *pats = calloc((size_t)c->n_tensor_types + 1, sizeof *pats);
    int n_pats = 0;
    plm_status st = list && pats ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    for (; !st && n_pats < c->n_tensor_types; n_pats++)
        if ((st = parse_pattern(c->tensor_types[n_pats], &pats[n_pats], err))) break;
    mix_state s = {.ftype = c->ftype, .has_imatrix = c->has_imatrix, .output_type = c->output_type};
    if (!st) st = list_tensors(in, list, err);
    if (!st && !c->pure) st = read_model(in, list, in->n_tensors, &s, err);
    for (uint64_t i = 0; !st && c->pure && i < in->n_tensors; i++)
        s.has_output |= !strcmp(list[i].name, "output.weight");
    for (uint64_t k = 0; !st && k < in->n_tensors; k++) {
        const plm_gguf_tensor *t = &in->tensors[list[k].index];
        if (plm_is_weight_matrix(t)) out_type[list[k].index] = choose_one(&s, c, pats, t, list[k].name);
    }
    for (int i = 0; pats && i < n_pats; i++) regfree(&pats[i].re);
    free(pats);
    free(list);
    return st;
}
