#include "fit.h"

#include <stdio.h>

#include "units.h"

/* Planning never needs bandwidth here: a dummy answer keeps it from measuring. */
static double no_bandwidth(void *user) {
    (void)user;
    return 0;
}

/* The budget: --mem-limit as given, else this machine's available memory. */
static bool budget_device(const char *cmd, const char *mem_limit, plm_device *dev) {
    if (mem_limit) {
        double bytes;
        if (!parse_size(mem_limit, 1, &bytes) || bytes < 1) {
            fprintf(stderr, "pocketlm %s: --mem-limit '%s' is not a size like 2G or 512M\n", cmd, mem_limit);
            return false;
        }
        *dev = (plm_device){.name = "limit", .ram_bytes = (uint64_t)bytes, .app_share = 1.0};
        return true;
    }
    plm_error err;
    if (plm_device_this(dev, no_bandwidth, NULL, &err) == PLM_OK) return true;
    fprintf(stderr, "pocketlm %s: cannot read this machine's memory: %s\n", cmd, err.message);
    return false;
}

static void print_bill(const char *cmd, const plm_plan *p, const plm_plan_verdict *v) {
    char a[32], b[32], c[32], d[32];
    fprintf(stderr, "pocketlm %s: needs %s at %u tokens of context (weights %s, KV cache %s) but the budget is %s\n",
            cmd, human(p->peak_rss, a, sizeof a), p->params.n_ctx, human(p->weights_resident, b, sizeof b),
            human(p->kv_bytes, c, sizeof c), human(v->budget_bytes, d, sizeof d));
    if (v->max_ctx > 0)
        fprintf(stderr, "  try -c %u (the largest context that fits)%s%s%s\n", v->max_ctx,
                p->params.type_k == PLM_KV_F16 ? ", or --cache-type-k q8_0 --cache-type-v q8_0" : "",
                v->quant_for_ctx[0] ? ", or a smaller quant such as " : "", v->quant_for_ctx);
    else if (v->quant_for_ctx[0])
        fprintf(stderr, "  the weights alone do not fit: try a smaller quant such as %s\n", v->quant_for_ctx);
    else
        fprintf(stderr, "  the model does not fit this budget at any context or quant\n");
}

bool fit_context(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                 plm_context_params *cp) {
    plm_device dev;
    if (!budget_device(cmd, mem_limit, &dev)) return false;

    plm_plan_params pp = plm_plan_default_params();
    pp.n_ctx = cp->n_ctx;
    pp.n_batch = cp->n_batch;
    pp.n_threads = cp->n_threads;
    pp.type_k = cp->type_k;
    pp.type_v = cp->type_v;
    pp.use_mmap = use_mmap;
    pp.logits_all = cp->logits_all;
    plm_plan plan;
    plm_plan_verdict v;
    plm_error err;
    if (plm_plan_file(model_path, &pp, &plan, &err) || plm_plan_evaluate(&plan, &dev, &v, &err)) {
        fprintf(stderr, "pocketlm %s: %s\n", cmd, err.message);
        return false;
    }

    if (cp->n_ctx == 0) {
        uint32_t n = v.max_ctx < plan.n_ctx_train || !plan.n_ctx_train ? v.max_ctx : plan.n_ctx_train;
        if (n == 0) {
            print_bill(cmd, &plan, &v);
            return false;
        }
        char a[32];
        fprintf(stderr, "pocketlm %s: context %u tokens: %s (budget %s%s)\n", cmd, n,
                n == plan.n_ctx_train ? "the model's trained context, which fits" : "the largest that fits",
                human(v.budget_bytes, a, sizeof a), mem_limit ? ", --mem-limit" : ", this machine's available memory");
        cp->n_ctx = n;
        return true;
    }
    if (v.fit == PLM_NO_FIT || (mem_limit && v.fit != PLM_FITS)) {
        print_bill(cmd, &plan, &v);
        return false;
    }
    return true;
}
