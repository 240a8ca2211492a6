#include "fit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

/* Planning never needs bandwidth here: a dummy answer keeps it from measuring. */
static double no_bandwidth(void *user) {
    (void)user;
    return 0;
}

bool fit_budget_device(const char *cmd, const char *mem_limit, plm_device *dev) {
    double bytes = 0;
    if (mem_limit && (!parse_size(mem_limit, 1, &bytes) || bytes < 1)) {
        fprintf(stderr, "pocketlm %s: --mem-limit '%s' is not a size like 2G or 512M\n", cmd, mem_limit);
        return false;
    }
    plm_error err;
    if (plm_device_this(dev, no_bandwidth, NULL, &err) != PLM_OK) {
        fprintf(stderr, "pocketlm %s: cannot read this machine's memory: %s\n", cmd, err.message);
        return false;
    }
    uint64_t now = dev->ram_bytes - dev->used_bytes;
    if (dev->limit_bytes && dev->limit_bytes < now) now = dev->limit_bytes;
    if (mem_limit && (uint64_t)bytes < now) {
        dev->limit_bytes = (uint64_t)bytes;
        dev->limit_maps_count = false;
        snprintf(dev->limit_source, sizeof dev->limit_source, "--mem-limit");
    }
    return true;
}

/* " x 4 sequences" when the KV cache holds several (serve --parallel). */
static const char *seqs_note(const plm_plan *p, char note[32]) {
    note[0] = '\0';
    if (p->params.n_seq > 1) snprintf(note, 32, " x %u sequences", p->params.n_seq);
    return note;
}

static void print_bill(const char *cmd, const plm_plan *p, const plm_plan_verdict *v) {
    char a[32], b[32], c[32], d[32], e[32], f[32];
    fprintf(stderr,
            "pocketlm %s: does not fit: needs %s at %u tokens of context%s (weights %s, KV cache %s; %s that cannot "
            "be paged out) but the budget is %s (%s)\n",
            cmd, human(p->peak_rss, a, sizeof a), p->params.n_ctx, seqs_note(p, f), human(p->weights_resident, b, sizeof b),
            human(p->kv_bytes, c, sizeof c), human(p->anon_bytes, e, sizeof e), human(v->budget_bytes, d, sizeof d),
            v->budget_source);
    if (v->max_ctx > 0)
        fprintf(stderr, "  try -c %u (the largest context that fits)%s%s%s\n", v->max_ctx,
                p->params.type_k == PLM_KV_F16 ? ", or --cache-type-k q8_0 --cache-type-v q8_0" : "",
                v->quant_for_ctx[0] ? ", or a smaller quant such as " : "", v->quant_for_ctx);
    else if (v->quant_for_ctx[0])
        fprintf(stderr, "  the weights alone do not fit: try a smaller quant such as %s\n", v->quant_for_ctx);
    else
        fprintf(stderr, "  the model does not fit this budget at any context or quant\n");
}

/* Largest context (a multiple of 256, or n_ctx_train) whose anonymous
 * memory leaves a quarter of the budget to the mapped weights' pages: a
 * run that pages still needs room for the tensors it is reading. */
static uint32_t paging_ctx(const plm_plan *p, uint64_t budget) {
    uint32_t best = 0, top = p->n_ctx_train && p->n_ctx_train < 4096 ? p->n_ctx_train : 4096;
    for (uint32_t n = 256; n <= top; n += 256) {
        plm_plan t = *p;  /* afresh: set_ctx's n_batch clamp must not carry over */
        plm_plan_set_ctx(&t, n);
        if (t.anon_bytes > budget / 4 * 3) break;
        best = n;
    }
    return best;
}

static void warn_paging(const char *cmd, const plm_plan *p, const plm_plan_verdict *v) {
    char a[32], b[32], c[32];
    fprintf(stderr,
            "pocketlm %s: warning: the bill is %s (weights %s) but the budget is %s (%s): decode will read the "
            "weights from storage again every token",
            cmd, human(p->peak_rss, a, sizeof a), human(p->weights_resident, b, sizeof b),
            human(v->budget_bytes, c, sizeof c), v->budget_source);
    if (v->decode_tps_paged > 0)
        fprintf(stderr, ", about %.2f tok/s at an assumed %.2f GB/s (`pocketlm plan` measures this disk)",
                v->decode_tps_paged, v->storage_gbs);
    fprintf(stderr, "%s%s\n", v->quant_for_ctx[0] ? "; a smaller quant fits in RAM: " : "", v->quant_for_ctx);
}

static void fill_info(fit_info *fi, const plm_plan *p, const plm_plan_verdict *v) {
    if (!fi) return;
    *fi = (fit_info){.budget_bytes = v->budget_bytes, .peak_rss = p->peak_rss, .anon_bytes = p->anon_bytes,
                     .weights_bytes = p->weights_resident, .fit = v->fit, .paged_tps = v->decode_tps_paged};
    snprintf(fi->budget_source, sizeof fi->budget_source, "%s", v->budget_source);
    snprintf(fi->smaller_quant, sizeof fi->smaller_quant, "%s", v->quant_for_ctx);
}

/* The plan parameters of the context `cp` would make: what every fit below plans. */
static plm_plan_params plan_params_of(const plm_context_params *cp, bool use_mmap) {
    plm_plan_params pp = plm_plan_default_params();
    pp.n_ctx = cp->n_ctx;
    pp.n_batch = cp->n_batch;
    pp.n_threads = cp->n_threads;
    pp.type_k = cp->type_k;
    pp.type_v = cp->type_v;
    pp.use_mmap = use_mmap;
    pp.logits_all = cp->logits_all;
    pp.n_seq = cp->n_seq ? cp->n_seq : 1;  /* serve --parallel: a KV cache per slot */
    return pp;
}

bool fit_context_info(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                      plm_context_params *cp, fit_info *info) {
    plm_device dev;
    if (!fit_budget_device(cmd, mem_limit, &dev)) return false;

    plm_plan_params pp = plan_params_of(cp, use_mmap);
    plm_plan plan;
    plm_plan_verdict v;
    plm_error err;
    if (plm_plan_file(model_path, &pp, &plan, &err) || plm_plan_evaluate(&plan, &dev, &v, &err)) {
        fprintf(stderr, "pocketlm %s: %s\n", cmd, err.message);
        return false;
    }

    if (cp->n_ctx == 0) {
        uint32_t n = v.max_ctx < plan.n_ctx_train || !plan.n_ctx_train ? v.max_ctx : plan.n_ctx_train;
        const bool paging = n == 0 && use_mmap && !(dev.limit_maps_count && v.budget_bytes == dev.limit_bytes);
        if (paging) n = paging_ctx(&plan, v.budget_bytes);
        if (n == 0) {
            print_bill(cmd, &plan, &v);
            return false;
        }
        plm_plan_set_ctx(&plan, n);
        plm_plan_evaluate(&plan, &dev, &v, NULL);
        char a[32], f[32];
        fprintf(stderr, "pocketlm %s: context %u tokens%s: %s (budget %s: %s)\n", cmd, n, seqs_note(&plan, f),
                paging ? "the largest whose buffers leave room for paging"
                : n == plan.n_ctx_train ? "the model's trained context, which fits"
                                        : "the largest that fits",
                human(v.budget_bytes, a, sizeof a), v.budget_source);
        if (paging) warn_paging(cmd, &plan, &v);
        cp->n_ctx = n;
        fill_info(info, &plan, &v);
        return true;
    }
    if (v.fit == PLM_NO_FIT) {
        print_bill(cmd, &plan, &v);
        return false;
    }
    if (v.fit == PLM_FITS_MMAP) warn_paging(cmd, &plan, &v);
    fill_info(info, &plan, &v);
    return true;
}

bool fit_repack(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                const plm_context_params *cp, bool forced) {
    if (!forced && !use_mmap) return false; /* the copies would come on top of the file's image */
    plm_device dev;
    if (!fit_budget_device(cmd, mem_limit, &dev)) return false;
    plm_plan_params pp = plan_params_of(cp, use_mmap);
    pp.repack = true;
    plm_plan plan;
    plm_plan_verdict v;
    plm_error err;
    if (plm_plan_file(model_path, &pp, &plan, &err) || plm_plan_evaluate(&plan, &dev, &v, &err)) {
        if (forced) fprintf(stderr, "pocketlm %s: %s\n", cmd, err.message);
        return false;
    }
    if (!forced) return plan.repack_bytes > 0 && plan.peak_rss <= v.budget_bytes / 2 && plm_plan_repack_pays(&plan);
    if (v.fit == PLM_FITS) return true;
    char a[32], b[32], c[32];
    fprintf(stderr, "pocketlm %s: not repacking: with %s of interleaved copies the bill is %s, over the budget %s (%s)\n",
            cmd, human(plan.repack_bytes, a, sizeof a), human(plan.peak_rss, b, sizeof b),
            human(v.budget_bytes, c, sizeof c), v.budget_source);
    return false;
}

bool fit_context(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                 plm_context_params *cp) {
    return fit_context_info(cmd, model_path, use_mmap, mem_limit, cp, NULL);
}

/* Target and draft in one process (plm_plan_add_draft): both models'
 * weights, both KV caches and buffers, the process overhead once, and the
 * target's logits for a whole verification. */
static uint64_t pair_bill(const plm_plan *pair, uint32_t n_ctx) {
    plm_plan t = *pair;  /* afresh: set_ctx's n_batch clamp must not carry over */
    plm_plan_set_ctx(&t, n_ctx);
    return t.peak_rss;
}

bool fit_context_draft(const char *cmd, const char *model_path, const char *draft_path, bool use_mmap,
                       const char *mem_limit, int draft_max, plm_context_params *cp) {
    plm_device dev;
    if (!fit_budget_device(cmd, mem_limit, &dev)) return false;
    plm_plan_params pp = plan_params_of(cp, use_mmap);
    pp.logits_all = false; /* the verification's logits are the draft bill's (plm_plan_add_draft) */
    plm_plan t, d;
    plm_plan_verdict v;
    plm_error err;
    if (plm_plan_file(model_path, &pp, &t, &err) || plm_plan_file(draft_path, &pp, &d, &err) ||
        plm_plan_add_draft(&t, &d, draft_max, &err) || plm_plan_evaluate(&t, &dev, &v, &err)) {
        fprintf(stderr, "pocketlm %s: %s\n", cmd, err.message);
        return false;
    }
    char a[32], b[32], c[32], e[32];
    if (cp->n_ctx) {
        const uint64_t need = pair_bill(&t, cp->n_ctx);
        if (need <= v.budget_bytes) return true;
        fprintf(stderr, "pocketlm %s: model and draft need %s at %u tokens of context (draft: weights %s, KV %s) but the "
                "budget is %s\n", cmd, human(need, a, sizeof a), cp->n_ctx, human(d.weights_resident, b, sizeof b),
                human(d.kv_bytes, c, sizeof c), human(v.budget_bytes, e, sizeof e));
        return false;
    }
    /* The largest multiple of 256 (up to the trained context) where both fit. */
    const uint32_t top = t.n_ctx_train ? t.n_ctx_train : 4096;
    uint32_t lo = 0, hi = top / 256;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (pair_bill(&t, mid * 256) <= v.budget_bytes) lo = mid;
        else hi = mid - 1;
    }
    uint32_t n = lo * 256;
    if (n == 0 && top < 256 && pair_bill(&t, top) <= v.budget_bytes) n = top;
    if (n == 0) {
        fprintf(stderr, "pocketlm %s: the model and its draft do not fit the budget of %s at any context\n", cmd,
                human(v.budget_bytes, a, sizeof a));
        return false;
    }
    fprintf(stderr, "pocketlm %s: context %u tokens for the model and its draft (%s with both; budget %s)\n", cmd, n,
            human(pair_bill(&t, n), a, sizeof a), human(v.budget_bytes, b, sizeof b));
    cp->n_ctx = n;
    return true;
}
