#include "spec_cli.h"

#include "fit.h"

spec_cli spec_cli_defaults(void) {
    plm_spec_params p = plm_spec_default_params();
    return (spec_cli){.draft_max = p.draft_max, .draft_min = p.draft_min, .draft_p_min = p.draft_p_min};
}

void spec_cli_args(spec_cli *o, arg_spec *dst) {
    const arg_spec a[SPEC_CLI_N_ARGS] = {
        {NULL, "--draft-model", ARG_STR, &o->draft_model, "PATH",
         "speculative decoding: a small model of the same vocabulary drafts tokens the model verifies in one batch"},
        {NULL, "--draft-max", ARG_INT, &o->draft_max, "N", "most tokens drafted per verification (1..64)"},
        {NULL, "--draft-min", ARG_INT, &o->draft_min, "N", "verify no fewer drafted tokens than this"},
        {NULL, "--draft-p-min", ARG_FLOAT, &o->draft_p_min, "P", "the draft stops below this top probability"},
        {NULL, "--lookup", ARG_INT, &o->lookup, "N",
         "speculative decoding without a draft: propose what followed the last N (..1) tokens earlier in prompt + output"},
        {NULL, "--lookup-cache", ARG_STR, &o->lookup_cache, "FILE",
         "speculative decoding from an n-gram cache kept in FILE across runs (created if missing)"},
        {NULL, "--draft-fixed", ARG_FLAG, &o->no_adapt, NULL,
         "always draft --draft-max tokens (default: follow the measured acceptance, pause when it does not pay)"},
    };
    for (int i = 0; i < SPEC_CLI_N_ARGS; i++) dst[i] = a[i];
}

bool spec_cli_wanted(const spec_cli *o) { return o->draft_model || o->lookup > 0 || o->lookup_cache; }

bool spec_cli_fit(const char *cmd, const spec_cli *o, const char *model_path, bool use_mmap, const char *mem_limit,
                  plm_context_params *cp) {
    if (!o->draft_model) return fit_context(cmd, model_path, use_mmap, mem_limit, cp);
    return fit_context_draft(cmd, model_path, o->draft_model, use_mmap, mem_limit, o->draft_max, cp);
}

plm_spec_params spec_cli_params(const spec_cli *o) {
    plm_spec_params sp = plm_spec_default_params();
    sp.draft_max = o->draft_max;
    sp.draft_min = o->draft_min;
    sp.draft_p_min = o->draft_p_min;
    sp.lookup_ngram = o->lookup;
    sp.lookup_cache = o->lookup_cache;
    sp.adaptive = !o->no_adapt;
    return sp;
}

bool spec_cli_open(const char *cmd, spec_cli *o, plm_context *ctx, const plm_context_params *cp, bool use_mmap) {
    plm_error err;
    if (o->draft_model) {
        plm_model_params mp = plm_model_default_params();
        mp.use_mmap = use_mmap;
        plm_context_params dp = *cp;
        dp.n_ctx = plm_context_n_ctx(ctx);
        dp.logits_all = false;
        if (plm_model_load(o->draft_model, &mp, &o->draft, &err) || plm_context_new(o->draft, &dp, &o->dctx, &err)) {
            fprintf(stderr, "pocketlm %s: draft model %s: %s\n", cmd, o->draft_model, err.message);
            return false;
        }
    }
    const plm_spec_params sp = spec_cli_params(o);
    if (plm_spec_new(ctx, o->dctx, &sp, &o->spec, &err)) {
        fprintf(stderr, "pocketlm %s: %s\n", cmd, err.message);
        return false;
    }
    return true;
}

void spec_cli_report(const spec_cli *o, FILE *out) {
    if (!o->spec) return;
    plm_spec_stats st;
    plm_spec_get_stats(o->spec, &st);
    fprintf(out,
            "speculative: %llu steps, %llu verified %llu proposals, %.1f%% accepted, %.2f tokens per verification, "
            "%llu plain steps (paused), draft length now %d\n",
            (unsigned long long)st.steps, (unsigned long long)st.verifications, (unsigned long long)st.proposed,
            st.proposed ? 100.0 * (double)st.accepted / (double)st.proposed : 0.0,
            st.verifications ? (double)(st.accepted + st.verifications) / (double)st.verifications : 0.0,
            (unsigned long long)st.paused_steps, st.draft_len);
}

bool spec_cli_close(const char *cmd, spec_cli *o) {
    bool ok = true;
    plm_error err;
    if (o->spec && plm_spec_save_cache(o->spec, &err)) {
        fprintf(stderr, "pocketlm %s: %s\n", cmd, err.message);
        ok = false;
    }
    plm_spec_free(o->spec);
    plm_context_free(o->dctx);
    plm_model_free(o->draft);
    o->spec = NULL;
    o->dctx = NULL;
    o->draft = NULL;
    return ok;
}
