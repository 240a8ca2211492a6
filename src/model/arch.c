/*
 * The registry of architecture descriptors and what every family shares:
 * reading the hyperparameter keys a descriptor lists, and the derived
 * defaults and checks llama.cpp applies to all of them.
 */
#include "model/arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static const plm_arch *const registry[] = {&plm_arch_llama, &plm_arch_qwen2, &plm_arch_qwen3, &plm_arch_granite,
                                           &plm_arch_phi3, &plm_arch_qwen3moe, &plm_arch_gemma2, &plm_arch_gemma3};
enum { N_ARCH = sizeof registry / sizeof registry[0] };

const plm_arch *const *plm_arch_all(int *n) {
    if (n) *n = N_ARCH;
    return registry;
}

const plm_arch *plm_arch_find(const char *name) {
    for (int i = 0; i < N_ARCH; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}

void plm_arch_names(char *buf, size_t size) {
    if (size) buf[0] = '\0';
    for (int i = 0; i < N_ARCH; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", i ? ", " : "", registry[i]->name);
    }
}

int64_t plm_dim_size(const plm_hparams *hp, plm_dim d) {
    switch (d) {
    case PLM_DIM_EMBD: return hp->n_embd;
    case PLM_DIM_Q: return (int64_t)hp->n_head * hp->head_dim;
    case PLM_DIM_KV: return (int64_t)hp->n_head_kv * hp->head_dim;
    case PLM_DIM_FF: return hp->n_ff;
    case PLM_DIM_VOCAB: return hp->n_vocab;
    case PLM_DIM_HEAD: return hp->head_dim;
    case PLM_DIM_ROPE: return hp->n_rot / 2;
    case PLM_DIM_QKV: return (int64_t)(hp->n_head + 2 * hp->n_head_kv) * hp->head_dim;
    case PLM_DIM_FF2: return 2 * (int64_t)hp->n_ff;
    case PLM_DIM_EXPERTS: return hp->n_expert;
    case PLM_DIM_FF_EXP:
    case PLM_DIM_EXP_FF: return hp->n_ff_expert;
    case PLM_DIM_EXP_EMBD: return hp->n_embd;
    default: return 1;
    }
}

const plm_arch *plm_arch_for_file(const plm_arch *a, const plm_gguf_file *f) {
    char key[64];
    uint32_t n = 0;
    snprintf(key, sizeof key, "%s.expert_count", a->name);
    return a->with_experts && plm_gguf_get_u32(f, key, &n) && n > 0 ? a->with_experts : a;
}

int64_t plm_dim_experts(const plm_hparams *hp, plm_dim ne1) {
    return ne1 == PLM_DIM_EXP_FF || ne1 == PLM_DIM_EXP_EMBD ? hp->n_expert : 0;
}

int plm_arch_layer_vectors(const plm_arch *arch) {
    int n = 0;
    for (const plm_tensor_spec *t = arch->layer; t->name; t++) n += t->ne1 == PLM_DIM_NONE;
    return n;
}

uint32_t plm_arch_layer_window(const plm_arch *arch, const plm_hparams *hp, int il) {
    (void)arch;
    const int n = hp->swa_pattern;
    if (hp->n_swa <= 0) return 0;
    if (n > 0 && il % n == n - 1) return 0;  /* the global layers: the last of each period */
    return (uint32_t)hp->n_swa;
}

/* ---- reading the keys ------------------------------------------------------ */

/* Fields every family has, at the values that mean "not used". */
static void neutral(plm_hparams *hp) {
    hp->attn_scale = 0.0f;
    hp->embd_scale = hp->residual_scale = hp->logit_scale = 1.0f;
    hp->rope_freq_scale = hp->rope_freq_scale_swa = 1.0f;
    hp->rope_attn_factor = 1.0f;
}

static plm_status read_key(const plm_hp_key *k, const plm_gguf_file *f, plm_hparams *hp, plm_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", hp->arch, k->key);
    void *field = (char *)hp + k->offset;
    if (k->kind == PLM_HP_F32) {
        float v;
        if (plm_gguf_get_f32(f, key, &v)) {
            if (!isfinite(v)) return plm_fail(err, PLM_ERR_FORMAT, "invalid metadata %s", key);
            *(float *)field = v;
        } else if (k->required) {
            return plm_fail(err, PLM_ERR_FORMAT, "missing metadata %s", key);
        } else {
            *(float *)field = k->dflt;
        }
        return PLM_OK;
    }
    uint32_t v;
    if (plm_gguf_get_u32(f, key, &v)) {
        if (v > (1u << 24) || (v == 0 && k->required))
            return plm_fail(err, PLM_ERR_FORMAT, "missing or invalid metadata %s=%u", key, v);
        *(int *)field = (int)v;
    } else if (k->required) {
        return plm_fail(err, PLM_ERR_FORMAT, "missing or invalid metadata %s", key);
    } else {
        *(int *)field = isnan(k->dflt) ? -1 : (int)k->dflt;  /* -1: derived below */
    }
    return PLM_OK;
}

/* Linear RoPE scaling stretches positions: theta uses pos / factor. */
static plm_status read_rope_scaling(const plm_gguf_file *f, plm_hparams *hp, plm_error *err) {
    char key[128];
    float factor = 0;
    plm_gguf_str type = {0};
    snprintf(key, sizeof key, "%s.rope.scaling.type", hp->arch);
    const bool has_type = plm_gguf_get_str(f, key, &type);
    snprintf(key, sizeof key, "%s.rope.scaling.factor", hp->arch);
    bool has_factor = plm_gguf_get_f32(f, key, &factor);
    if (!has_factor) {
        snprintf(key, sizeof key, "%s.rope.scale_linear", hp->arch);
        has_factor = plm_gguf_get_f32(f, key, &factor);
    }
    if (!has_factor) return PLM_OK;
    if (has_type && !plm_gguf_str_eq(type, "linear") && !plm_gguf_str_eq(type, "none"))
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "RoPE scaling type '%.*s' is not supported", (int)type.len,
                        type.ptr);
    if (factor > 0 && !(has_type && plm_gguf_str_eq(type, "none"))) hp->rope_freq_scale = 1.0f / factor;
    return PLM_OK;
}

/* Mixture-of-Experts: an expert's FFN width is expert_feed_forward_length
 * (qwen3moe; llama.cpp takes n_ff / n_expert_used without it: -1 here), or
 * n_ff for families without the key (Mixtral). */
static plm_status derive_experts(plm_hparams *hp, plm_error *err) {
    if (hp->n_expert <= 0) return PLM_OK;
    if (hp->n_expert > PLM_MOE_MAX_EXPERTS || hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert)
        return plm_fail(err, PLM_ERR_FORMAT, "%s.expert_count=%d / expert_used_count=%d: need 0 < used <= count <= %d",
                        hp->arch, hp->n_expert, hp->n_expert_used, PLM_MOE_MAX_EXPERTS);
    if (hp->n_ff_expert < 0) hp->n_ff_expert = hp->n_ff / hp->n_expert_used;
    else if (hp->n_ff_expert == 0) hp->n_ff_expert = hp->n_ff;
    if (hp->n_ff_expert <= 0) return plm_fail(err, PLM_ERR_FORMAT, "%s: expert FFN length is 0", hp->arch);
    return PLM_OK;
}

/* Defaults llama.cpp derives from other keys, then the checks the forward
 * pass relies on (head_dim <= 1024 bounds its stack buffers). */
static plm_status derive_and_check(plm_hparams *hp, plm_error *err) {
    const char *a = hp->arch;
    if (hp->n_head_kv < 0) hp->n_head_kv = hp->n_head;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv)
        return plm_fail(err, PLM_ERR_FORMAT, "%s.attention.head_count_kv=%d does not divide head_count=%d", a,
                        hp->n_head_kv, hp->n_head);
    if (hp->head_dim < 0) hp->head_dim = hp->n_embd / hp->n_head;
    if (hp->head_dim <= 0 || hp->head_dim % 2 || hp->head_dim > 1024)
        return plm_fail(err, PLM_ERR_FORMAT, "invalid head dimension %d", hp->head_dim);
    if (hp->head_dim_v <= 0) hp->head_dim_v = hp->head_dim;  /* absent, or a family without the key */
    if (hp->head_dim_v != hp->head_dim)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "%s.attention.value_length=%d differs from key_length=%d", a,
                        hp->head_dim_v, hp->head_dim);
    if (hp->n_rot < 0) hp->n_rot = hp->head_dim;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return plm_fail(err, PLM_ERR_FORMAT, "%s.rope.dimension_count=%d invalid for head dim %d", a, hp->n_rot,
                        hp->head_dim);
    if (hp->n_ctx_train <= 0) hp->n_ctx_train = 2048;
    plm_status st = derive_experts(hp, err);
    if (st) return st;
    if (hp->n_ctx_orig <= 0) hp->n_ctx_orig = hp->n_ctx_train;
    if (hp->logit_scale == 0.0f) return plm_fail(err, PLM_ERR_FORMAT, "%s.logit_scale is 0", a);
    return PLM_OK;
}

plm_status plm_hparams_read(const plm_arch *arch, const plm_gguf_file *f, plm_hparams *hp, plm_error *err) {
    memset(hp, 0, sizeof *hp);
    neutral(hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch->name);
    plm_gguf_str name;
    if (plm_gguf_get_str(f, "general.name", &name)) plm_gguf_str_copy(name, hp->name, sizeof hp->name);
    plm_status st;
    for (const plm_hp_key *k = arch->hparams; k->key; k++)
        if ((st = read_key(k, f, hp, err))) return st;
    if ((st = derive_and_check(hp, err)) || (st = read_rope_scaling(f, hp, err))) return st;
    hp->rope_type = arch->rope;
    if (arch->embd_scale_sqrt) hp->embd_scale = sqrtf((float)hp->n_embd);
    if (arch->derive) arch->derive(hp);
    const plm_gguf_tensor *te = plm_gguf_find_tensor(f, "token_embd.weight");
    if (te && te->n_dims == 2 && te->ne[1] <= INT32_MAX) hp->n_vocab = (int)te->ne[1];
    return PLM_OK;
}
