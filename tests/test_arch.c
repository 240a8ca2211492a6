/*
 * Architecture descriptors (model/arch/): their tensor tables against files
 * llama.cpp's own converter wrote (the fixtures), the errors for an unknown
 * architecture and a missing tensor, and the KV cache's per-layer layout
 * for sliding-window layers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/kv_cache.h"
#include "model/model.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"
#include "pocketlm_tools.h"
#include "pocketlm_gguf.h"
#include "test.h"

static const plm_gguf_open_params open_params = {true, false};

/* Every name a descriptor's tables expand to for n_layer layers. */
static bool table_names(const plm_arch *a, int n_layer, const char *name, const plm_tensor_spec **spec) {
    char buf[96];
    for (const plm_tensor_spec *t = a->globals; t->name; t++)
        if (!strcmp(t->name, name)) return *spec = t, true;
    for (int il = 0; il < n_layer; il++)
        for (const plm_tensor_spec *t = a->layer; t->name; t++) {
            snprintf(buf, sizeof buf, t->name, il);
            if (!strcmp(buf, name)) return *spec = t, true;
        }
    return false;
}

/* The fixtures come from llama.cpp's convert_hf_to_gguf.py: every tensor in
 * them must be an entry of the descriptor's tables, with the shape the
 * hyperparameters give, and every required entry must be in them. */
static void check_fixture(const char *path, const char *arch_name) {
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(path, &open_params, &err);
    REQUIRE_VOID(f != NULL, "%s: %s", path, err.message);
    const plm_arch *a = plm_arch_find(arch_name);
    REQUIRE_VOID(a != NULL, "descriptor %s", arch_name);
    plm_hparams hp;
    REQUIRE_VOID(plm_hparams_read(a, f, &hp, &err) == PLM_OK, "%s: %s", path, err.message);
    int unknown = 0, bad_shape = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        char name[96];
        plm_gguf_str_copy(f->tensors[i].name, name, sizeof name);
        const plm_tensor_spec *t;
        if (!table_names(a, hp.n_layer, name, &t)) {
            CHECK(0, "%s: tensor %s is in no table of '%s'", path, name, arch_name);
            unknown++;
            continue;
        }
        const uint64_t ne0 = (uint64_t)plm_dim_size(&hp, t->ne0), ne1 = (uint64_t)plm_dim_size(&hp, t->ne1);
        if (f->tensors[i].ne[0] != ne0 || f->tensors[i].ne[1] != ne1) {
            CHECK(0, "%s: %s is %llu x %llu, table says %llu x %llu", path, name,
                  (unsigned long long)f->tensors[i].ne[0], (unsigned long long)f->tensors[i].ne[1],
                  (unsigned long long)ne0, (unsigned long long)ne1);
            bad_shape++;
        }
    }
    CHECK(unknown == 0 && bad_shape == 0, "%s: %llu tensors match the tables", path,
          (unsigned long long)f->n_tensors);
    for (int il = 0; il < hp.n_layer; il++)
        for (const plm_tensor_spec *t = a->layer; t->name; t++) {
            char name[96];
            snprintf(name, sizeof name, t->name, il);
            if (t->need == PLM_REQUIRED) CHECK(plm_gguf_find_tensor(f, name) != NULL, "%s: required %s absent", path, name);
        }
    plm_gguf_close(f);
}

/* Copies `src` to `dst`, leaving out the tensor or metadata key `drop` (if
 * any), setting general.architecture to `arch` (if any) and adding `add`, a
 * vector of 16 floats (if any). */
static bool rewrite_add(const char *src, const char *dst, const char *drop, const char *arch, const char *add) {
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(src, &open_params, &err);
    if (!f) return false;
    plm_gguf_writer *w = plm_gguf_writer_new();
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!drop || !plm_gguf_str_eq(f->kv[i].key, drop)) plm_gguf_writer_copy_kv(w, &f->kv[i]);
    if (arch) plm_gguf_writer_set_str(w, "general.architecture", arch);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const plm_gguf_tensor *t = &f->tensors[i];
        char name[96];
        plm_gguf_str_copy(t->name, name, sizeof name);
        if (drop && !strcmp(name, drop)) continue;
        plm_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
    }
    static const float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const uint64_t ne[1] = {16};
    if (add) plm_gguf_writer_add_tensor(w, add, PLM_TYPE_F32, 1, ne, ones);
    bool ok = plm_gguf_writer_write(w, dst, NULL, NULL, &err) == PLM_OK;
    plm_gguf_writer_free(w);
    plm_gguf_close(f);
    return ok;
}

static bool rewrite(const char *src, const char *dst, const char *drop, const char *arch) {
    return rewrite_add(src, dst, drop, arch, NULL);
}

static void check_errors(const char *dir) {
    char path[512];
    plm_model *m = NULL;
    plm_error err;
    snprintf(path, sizeof path, "%s/mamba.gguf", dir);
    REQUIRE_VOID(rewrite(SHARED("models/fixtures/fixture-llama-f16.gguf"), path, NULL, "mamba9"), "rewrite");
    CHECK(plm_model_load(path, NULL, &m, &err) == PLM_ERR_UNSUPPORTED && !m, "unknown architecture loads");
    CHECK(strstr(err.message, "unknown architecture 'mamba9'; supported: llama, qwen2, qwen3, granite, phi3") != NULL,
          "message: %s",
          err.message);
    plm_plan p;
    CHECK(plm_plan_file(path, NULL, &p, &err) == PLM_ERR_UNSUPPORTED, "plan of an unknown architecture");
    CHECK(strstr(err.message, "unknown architecture 'mamba9'; supported: llama, qwen2, qwen3, granite, phi3") != NULL,
          "plan message: %s", err.message);
    remove(path);

    /* qwen2 requires its biases; llama does not. */
    snprintf(path, sizeof path, "%s/nobias.gguf", dir);
    REQUIRE_VOID(rewrite(SHARED("models/fixtures/fixture-qwen2-f16.gguf"), path, "blk.1.attn_k.bias", NULL),
                 "rewrite");
    CHECK(plm_model_load(path, NULL, &m, &err) == PLM_ERR_FORMAT && !m, "missing bias loads");
    CHECK(strstr(err.message, "'blk.1.attn_k.bias' is missing") && strstr(err.message, "qwen2"), "message: %s",
          err.message);
    remove(path);

    snprintf(path, sizeof path, "%s/noffn.gguf", dir);
    REQUIRE_VOID(rewrite(SHARED("models/fixtures/fixture-llama-f16.gguf"), path, "blk.0.ffn_down.weight", NULL),
                 "rewrite");
    CHECK(plm_model_load(path, NULL, &m, &err) == PLM_ERR_FORMAT && !m, "missing ffn_down loads");
    CHECK(strstr(err.message, "'blk.0.ffn_down.weight' is missing") != NULL, "message: %s", err.message);
    remove(path);

    /* Without output.weight the output is tied to the embedding. */
    snprintf(path, sizeof path, "%s/tied.gguf", dir);
    REQUIRE_VOID(rewrite(SHARED("models/fixtures/fixture-llama-f16.gguf"), path, "output.weight", NULL),
                 "rewrite");
    CHECK(plm_model_load(path, NULL, &m, &err) == PLM_OK, "tied: %s", err.message);
    if (m) CHECK(m->output.data == m->tok_embd.data, "output tied to token_embd");
    plm_model_free(m);
    remove(path);
}

/* Synthesizes `shape` into dir/NAME.gguf, rewrites it without `drop` and
 * expects loading to fail with a message containing `want`. */
static void check_refused(const char *dir, const char *shape, const char *drop, const char *want) {
    char full[512], cut[512];
    snprintf(full, sizeof full, "%s/%s.gguf", dir, shape);
    snprintf(cut, sizeof cut, "%s/%s-cut.gguf", dir, shape);
    plm_synth_params sp = {shape, SHARED("models/stories260K.gguf"), full, true, 1};
    plm_error err;
    REQUIRE_VOID(plm_synth(&sp, &err) == PLM_OK, "synth %s: %s", shape, err.message);
    plm_model *m = NULL;
    CHECK(plm_model_load(full, NULL, &m, &err) == PLM_OK, "%s loads: %s", shape, err.message);
    plm_model_free(m);
    m = NULL;
    REQUIRE_VOID(rewrite(full, cut, drop, NULL), "rewrite");
    CHECK(plm_model_load(cut, NULL, &m, &err) != PLM_OK && !m, "%s without %s loads", shape, drop);
    CHECK(strstr(err.message, want) != NULL, "%s without %s: message: %s", shape, drop, err.message);
    remove(full);
    remove(cut);
}

/* A Mixtral file is a "llama" file with experts: it gets the MoE table,
 * and each expert of a 3-D tensor is the next rows x row_bytes slice. */
static void check_moe_binding(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/mixtral.gguf", dir);
    plm_synth_params sp = {"test-mixtral-tiny", SHARED("models/stories260K.gguf"), path, false, 1};
    plm_error err;
    REQUIRE_VOID(plm_synth(&sp, &err) == PLM_OK, "synth: %s", err.message);
    plm_model *m = NULL;
    REQUIRE_VOID(plm_model_load(path, NULL, &m, &err) == PLM_OK, "mixtral loads: %s", err.message);
    CHECK(m->arch == &plm_arch_llama_moe && m->arch->ffn == PLM_FFN_MOE && !strcmp(plm_model_arch(m), "llama"),
          "llama with expert_count: the MoE descriptor");
    CHECK(m->hp.n_expert == 8 && m->hp.n_expert_used == 2 && m->hp.n_ff_expert == 512, "experts %d/%d x %d",
          m->hp.n_expert, m->hp.n_expert_used, m->hp.n_ff_expert);
    const plm_weight *up = &m->layers[1].ffn_up_exps, *down = &m->layers[1].ffn_down_exps;
    CHECK(up->experts == 8 && up->rows == 512 && up->cols == 256 && down->rows == 256 && down->cols == 512 &&
              m->layers[1].ffn_gate_inp.rows == 8 && m->layers[1].ffn_gate_inp.type == PLM_TYPE_F32,
          "3-D shapes; router in F32");
    const plm_weight e3 = plm_weight_expert(up, 3);
    CHECK(e3.data == (const char *)up->data + 3 * 512 * up->row_bytes && e3.experts == 0, "expert 3's slice");
    CHECK(m->weight_bytes - m->weight_bytes_active == 2ull * 3 * 6 * 512 * 256 * 2, "6 of 8 experts idle per token");
    plm_model_free(m);
    remove(path);
}

/* What the new families require of a file. */
static void check_family_errors(const char *dir) {
    check_refused(dir, "test-qwen3-tiny", "blk.1.attn_k_norm.weight", "'blk.1.attn_k_norm.weight' is missing");
    check_refused(dir, "test-granite-tiny", "granite.logit_scale", "missing metadata granite.logit_scale");
    /* Mixture-of-Experts: the 3-D expert tensors, the router and the expert counts */
    check_refused(dir, "test-qwen3moe-tiny", "blk.1.ffn_up_exps.weight", "'blk.1.ffn_up_exps.weight' is missing");
    check_refused(dir, "test-qwen3moe-tiny", "qwen3moe.expert_count", "metadata qwen3moe.expert_count");
    check_refused(dir, "test-mixtral-tiny", "blk.0.ffn_gate_inp.weight", "'blk.0.ffn_gate_inp.weight' is missing");
    check_refused(dir, "test-mixtral-tiny", "llama.expert_used_count", "metadata llama.expert_used_count");
    check_moe_binding(dir);
    /* phi3 with LongRoPE factors (the 128k models) is refused, by name. */
    check_refused(dir, "test-gemma3-tiny", "blk.6.post_ffw_norm.weight", "'blk.6.post_ffw_norm.weight' is missing");
    check_refused(dir, "test-gemma2-tiny", "blk.0.post_attention_norm.weight",
                  "'blk.0.post_attention_norm.weight' is missing");
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/phi3.gguf", dir);
    snprintf(dst, sizeof dst, "%s/phi3-long.gguf", dir);
    plm_synth_params pp = {"test-phi3-tiny", SHARED("models/stories260K.gguf"), src, true, 1};
    plm_error perr;
    REQUIRE_VOID(plm_synth(&pp, &perr) == PLM_OK, "synth phi3: %s", perr.message);
    plm_model *pm = NULL;
    CHECK(plm_model_load(src, NULL, &pm, &perr) == PLM_OK, "phi3 loads: %s", perr.message);
    if (pm) CHECK(pm->layers[0].wk.data == (const char *)pm->layers[0].wq.data + 256 * pm->layers[0].wq.row_bytes &&
                  pm->layers[0].wv.rows == 64 && pm->layers[0].w_up.rows == 512, "fused parts");
    plm_model_free(pm);
    pm = NULL;
    remove(src);

    /* phi3 with LongRoPE (the 128k models): both factor tables bound, the
     * original context and the converter's attention factor read. */
    pp.shape = "test-phi3-longrope-tiny";
    REQUIRE_VOID(plm_synth(&pp, &perr) == PLM_OK, "synth phi3 LongRoPE: %s", perr.message);
    CHECK(plm_model_load(src, NULL, &pm, &perr) == PLM_OK, "LongRoPE phi3 loads: %s", perr.message);
    if (pm)
        CHECK(pm->rope_long && pm->rope_short && pm->rope_long[15] > pm->rope_short[15] &&
                  pm->hp.n_ctx_orig == 512 && pm->hp.n_ctx_train == 8192 &&
                  fabsf(pm->hp.rope_attn_factor - sqrtf(1.0f + logf(16.0f) / logf(512.0f))) < 1e-6f,
              "LongRoPE: orig %d, attn_factor %g", pm->hp.n_ctx_orig, pm->hp.rope_attn_factor);
    plm_model_free(pm);
    pm = NULL;
    remove(src);

    /* gemma's defaults when the file leaves a key out, as llama.cpp's:
     * gemma2's attention cap 50 and windowed RoPE base = the global one;
     * gemma3's windowed RoPE base 10000 and no window without the key. */
    pp.shape = "test-gemma2-tiny";
    REQUIRE_VOID(plm_synth(&pp, &perr) == PLM_OK, "synth gemma2: %s", perr.message);
    REQUIRE_VOID(rewrite(src, dst, "gemma2.attn_logit_softcapping", NULL), "rewrite");
    CHECK(plm_model_load(dst, NULL, &pm, &perr) == PLM_OK, "gemma2 loads: %s", perr.message);
    if (pm)
        CHECK(pm->hp.attn_softcap == 50.0f && pm->hp.final_softcap == 5.0f && pm->hp.n_swa == 8 &&
                  pm->hp.embd_scale == 16.0f && plm_arch_layer_window(pm->arch, &pm->hp, 0) == 8 &&
                  plm_arch_layer_window(pm->arch, &pm->hp, 1) == 0,
              "gemma2 defaults: cap %g, final %g, window %d", pm->hp.attn_softcap, pm->hp.final_softcap, pm->hp.n_swa);
    plm_model_free(pm);
    pm = NULL;
    REQUIRE_VOID(rewrite(src, dst, "gemma2.rope.freq_base_swa", NULL), "rewrite");
    CHECK(plm_model_load(dst, NULL, &pm, &perr) == PLM_OK, "gemma2 loads: %s", perr.message);
    if (pm) CHECK(pm->hp.rope_freq_base_swa == pm->hp.rope_freq_base, "gemma2 SWA base %g", pm->hp.rope_freq_base_swa);
    plm_model_free(pm);
    pm = NULL;
    pp.shape = "test-gemma3-tiny";
    REQUIRE_VOID(plm_synth(&pp, &perr) == PLM_OK, "synth gemma3: %s", perr.message);
    REQUIRE_VOID(rewrite(src, dst, "gemma3.rope.freq_base_swa", NULL), "rewrite");
    CHECK(plm_model_load(dst, NULL, &pm, &perr) == PLM_OK, "gemma3 loads: %s", perr.message);
    if (pm)
        CHECK(pm->hp.rope_freq_base_swa == 10000.0f && pm->hp.rope_freq_base == 1e6f && pm->hp.attn_softcap == 0 &&
                  pm->hp.final_softcap == 0 && plm_arch_layer_window(pm->arch, &pm->hp, 4) == 8 &&
                  plm_arch_layer_window(pm->arch, &pm->hp, 5) == 0 && pm->layers[6].q_norm,
              "gemma3: SWA base %g", pm->hp.rope_freq_base_swa);
    plm_model_free(pm);
    pm = NULL;
    REQUIRE_VOID(rewrite(src, dst, "gemma3.attention.sliding_window", NULL), "rewrite");
    CHECK(plm_model_load(dst, NULL, &pm, &perr) == PLM_OK, "gemma3 loads: %s", perr.message);
    if (pm) CHECK(plm_arch_layer_window(pm->arch, &pm->hp, 0) == 0, "gemma3 without a window key: none");
    plm_model_free(pm);
    pm = NULL;

    /* attention.sliding_window_pattern 3: layers 2 and 5 global (llama.cpp's
     * set_swa_pattern); without the key, gemma3's 6: only layer 5. */
    pp.shape = "test-gemma3-pattern-tiny";
    REQUIRE_VOID(plm_synth(&pp, &perr) == PLM_OK, "synth gemma3 pattern: %s", perr.message);
    static const uint32_t pattern3[6] = {8, 8, 0, 8, 8, 0}, pattern6[6] = {8, 8, 8, 8, 8, 0};
    for (int drop = 0; drop <= 1; drop++) {
        REQUIRE_VOID(rewrite(src, dst, drop ? "gemma3.attention.sliding_window_pattern" : NULL, NULL), "rewrite");
        CHECK(plm_model_load(dst, NULL, &pm, &perr) == PLM_OK, "gemma3 loads: %s", perr.message);
        for (int il = 0; pm && il < 6; il++)
            CHECK(plm_arch_layer_window(pm->arch, &pm->hp, il) == (drop ? pattern6 : pattern3)[il],
                  "pattern %d: layer %d's window %u", pm->hp.swa_pattern, il,
                  plm_arch_layer_window(pm->arch, &pm->hp, il));
        plm_model_free(pm);
        pm = NULL;
        plm_plan plan;
        CHECK(plm_plan_file(dst, NULL, &plan, &perr) == PLM_OK && plan.n_layer_swa == (drop ? 5u : 4u) &&
                  plan.swa_pattern == (drop ? 6u : 3u),
              "plan: %u windowed layers, pattern %u", plan.n_layer_swa, plan.swa_pattern);
    }
    remove(src);
    remove(dst);

    /* llama's rope_freqs is optional (Llama 3.1+ only): dropping it loads. */
    char path[512];
    snprintf(path, sizeof path, "%s/llama3.gguf", dir);
    plm_synth_params sp = {"test-llama3-tiny", SHARED("models/stories260K.gguf"), path, true, 1};
    plm_error err;
    REQUIRE_VOID(plm_synth(&sp, &err) == PLM_OK, "synth: %s", err.message);
    plm_model *m = NULL;
    CHECK(plm_model_load(path, NULL, &m, &err) == PLM_OK, "llama3 loads: %s", err.message);
    if (m) CHECK(m->rope_freqs && m->rope_freqs[0] == 1.0f && m->rope_freqs[15] == 8.0f, "rope_freqs bound");
    plm_model_free(m);
    remove(path);
}

static int rerotations;
static void count_rerotation(void *user, plm_kv_cache *kv, plm_kv_seq seq, uint32_t first, uint32_t n, int delta) {
    (void)user, (void)kv, (void)seq;
    rerotations += first == 4 && n == 28 && delta == -8;
}

/* Reads layer 0's key row of position pos as the value stored in it. */
static float key_at(const plm_kv_cache *kv, uint32_t pos) {
    float back[32];
    plm_kernels_ref()->dequantize_row[PLM_TYPE_F16](plm_kv_keys(kv, 0, 0, pos), back, 32);
    return back[0] == back[31] ? back[0] : -1.0f;
}

/* Context shift of a ring (window 16, ring 24) holding positions 0..39
 * (row p holds p): dropping 8 after 4 moves position p + 8 to p, and the
 * positions a token reads next (new end 32: 17..31) are read as one run, into
 * the mirror.  Fewer than window - 1 positions after the kept ones: refused. */
static void check_window_shift(plm_kv_cache *kv) {
    const plm_kernels *kt = plm_kernels_ref();
    float row[32];
    for (uint32_t p = 0; p < 40; p++) {
        for (int i = 0; i < 32; i++) row[i] = (float)p;
        plm_ubatch b = {.n = 1, .pos0 = p};
        plm_kv_store(kv, kt, 0, &b, row, row);
    }
    kv->len[0] = 40;
    plm_error err;
    CHECK(plm_kv_seq_shift(kv, 0, 4, 30, count_rerotation, NULL, &err) == PLM_ERR_UNSUPPORTED &&
              strstr(err.message, "need the last 15 tokens, but only 6 follow the 4 kept") && kv->len[0] == 40,
          "a shift leaving 6 of a 16 window refused: %s", err.message);
    REQUIRE_VOID(plm_kv_seq_shift(kv, 0, 4, 8, count_rerotation, NULL, &err) == PLM_OK, "%s", err.message);
    CHECK(kv->len[0] == 32 && rerotations == 1, "32 positions left, one re-rotation of 4..31 by -8");
    bool moved = true;
    for (uint32_t q = 8; q < 32; q++) moved &= key_at(kv, q) == (float)(q + 8);  /* the ring's 24 */
    CHECK(moved, "positions 8..31 hold what 16..39 held");
    float back[32];
    bool run = true;
    for (uint32_t j = 0; j < 15; j++) {  /* 17..31 from position 17's cell on */
        kt->dequantize_row[PLM_TYPE_F16](plm_kv_keys(kv, 0, 0, 17) + j * kv->k_row, back, 32);
        run &= back[0] == (float)(25 + j);
    }
    CHECK(run, "the window before the new end reads as one run through the mirror");
    CHECK(plm_kv_first_held(kv, 0, 4, 32) == 8 && plm_kv_first_held(kv, 2, 4, 32) == 4, "held positions");
}

/* A descriptor with sliding-window layers: every third layer global. */
static void check_window_layout(void) {
    plm_hparams hp = {.n_layer = 6, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_swa = 16,
                      .swa_pattern = 3};
    plm_kv_spec s = {&plm_arch_llama, &hp, 256, 8, PLM_KV_F16, PLM_KV_F16, 1};
    /* a ring of window 16 + batch 8 and a mirror of 15; layers 2 and 5 global */
    const uint32_t want[6] = {39, 39, 256, 39, 39, 256};
    for (int il = 0; il < 6; il++)
        CHECK(plm_kv_layer_cells(&s, il) == want[il], "layer %d: %u cells", il, plm_kv_layer_cells(&s, il));
    plm_kv_size size;
    REQUIRE_VOID(plm_kv_size_of(&s, &size), "size");
    CHECK(size.cells == 4 * 39 + 2 * 256 && size.k_bytes == size.cells * 32 * 2, "%llu cells, %llu bytes",
          (unsigned long long)size.cells, (unsigned long long)size.k_bytes);
    plm_kv_cache kv;
    plm_error err;
    REQUIRE_VOID(plm_kv_init(&kv, &s, &err) == PLM_OK, "%s", err.message);
    /* Position 30 of a windowed layer wraps to cell 30 - 24; a global layer's is cell 30. */
    CHECK(plm_kv_keys(&kv, 0, 0, 30) == kv.k + 6 * kv.k_row, "windowed layer 0 wraps");
    CHECK(plm_kv_keys(&kv, 3, 0, 30) == kv.k + (2 * 39 + 256 + 6) * kv.k_row, "windowed layer 3 wraps");
    CHECK(plm_kv_keys(&kv, 2, 0, 30) == kv.k + (2 * 39 + 30) * kv.k_row, "global layer 2 does not");
    /* A token at 40 sees 25..40: from cell 1, 16 rows; one at 30 sees 15..30,
     * from cell 15 into the mirror, which holds what cells 0..6 hold. */
    CHECK(plm_kv_first_seen(&kv, 0, 40) == 25 && plm_kv_first_seen(&kv, 0, 10) == 0 &&
              plm_kv_first_seen(&kv, 2, 40) == 0, "first positions seen");
    const plm_kernels *kt = plm_kernels_ref();
    float row[32], back[32];
    for (uint32_t p = 0; p < 31; p++) {
        for (int i = 0; i < 32; i++) row[i] = (float)p;
        plm_ubatch b = {.n = 1, .pos0 = p};
        plm_kv_store(&kv, kt, 0, &b, row, row);
    }
    bool mirrored = true;
    for (uint32_t j = 0; j < 16; j++) {  /* positions 15..30, read as one run from position 15's cell */
        kt->dequantize_row[PLM_TYPE_F16](plm_kv_keys(&kv, 0, 0, 15) + j * kv.k_row, back, 32);
        mirrored &= back[0] == (float)(15 + j) && back[31] == (float)(15 + j);
    }
    CHECK(mirrored, "a wrapped window reads on into the mirror");
    check_window_shift(&kv);
    plm_kv_free(&kv);

    /* A window wider than the context is no window. */
    hp.n_swa = 1000;
    CHECK(plm_kv_layer_cells(&s, 0) == 256, "window >= context: full layer");
}

int main(void) {
    check_fixture(SHARED("models/fixtures/fixture-llama-f16.gguf"), "llama");
    check_fixture(SHARED("models/fixtures/fixture-qwen2-f16.gguf"), "qwen2");
    check_fixture(SHARED("models/fixtures/fixture-qwen2-Q4_K_M.gguf"), "qwen2");
    char dir[] = "/tmp/plm_test_arch_XXXXXX";
    if (mkdtemp(dir)) {
        check_errors(dir);
        check_family_errors(dir);
        rmdir(dir);
    } else {
        CHECK(0, "mkdtemp");
    }
    check_window_layout();
    return test_summary();
}
