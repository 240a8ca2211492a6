/*
 * pocketlm smoke test: does a candidate (another quantization, another KV
 * cache type, another kernel table, another machine) still answer like its
 * base?  The base model answers each prompt greedily and its distribution
 * at every answer position is kept (the top PLM_SMOKE_TOP_K tokens); the
 * candidate is then teacher-forced through the base's answer (so every
 * position is scored on the same input) and also answers greedily itself.
 *
 *   plm_smoke_answer base;                      // on the base model's context
 *   plm_smoke_generate(base_ctx, prompt, n_prompt, 48, &base, &err);
 *   plm_smoke_score s;                          // on the candidate's context
 *   plm_smoke_score_answer(cand_ctx, &base, 48, &s, &err);
 *   // s.kld_sum / s.n_positions, s.n_same_top, s.first_divergence, s.answer
 *
 * KL divergence per position is KL(base || candidate) over the base's top
 * tokens plus one bucket for the rest of the vocabulary: exact when the
 * vocabulary has at most PLM_SMOKE_TOP_K tokens, otherwise a lower bound
 * that differs from the full sum only by how the candidate spreads the
 * base's remaining mass (<= that mass times its log-ratio).  Both sides are
 * compared at float precision, so a model against itself gives exactly 0.
 */
#ifndef POCKETLM_SMOKE_H
#define POCKETLM_SMOKE_H

#include <stdint.h>

#include "pocketlm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLM_SMOKE_TOP_K 64

typedef struct plm_smoke_answer {
    plm_token *prompt;   /* n_prompt tokens */
    int n_prompt;
    plm_token *tokens;   /* the greedy answer; the last is end-of-generation when one ended it */
    int n_tokens;
    int top_k;           /* entries per position: min(PLM_SMOKE_TOP_K, vocabulary) */
    plm_token *top_ids;  /* n_tokens * top_k: the most probable next tokens, most probable first */
    float *top_lp;       /* n_tokens * top_k: their ln p */
} plm_smoke_answer;

/* Clears the context's KV cache, evaluates the prompt and answers greedily
 * (at most max_tokens, stopping after an end-of-generation token), keeping
 * every position's top tokens.  PLM_ERR_CONTEXT_FULL when prompt plus answer
 * do not fit.  Free *out with plm_smoke_answer_free, also after a failure. */
PLM_API plm_status plm_smoke_generate(plm_context *ctx, const plm_token *prompt, int n_prompt, int max_tokens,
                                      plm_smoke_answer *out, plm_error *err);
PLM_API void plm_smoke_answer_free(plm_smoke_answer *a);

typedef struct plm_smoke_score {
    int n_positions;       /* = base->n_tokens */
    int n_same_top;        /* positions where the candidate's most probable token is the base's token */
    int first_divergence;  /* first answer index where the two greedy answers differ; -1 = identical */
    double kld_sum, kld_max;
    float *kld;            /* per position */
    plm_token *answer;     /* the candidate's own greedy answer */
    int n_answer;
} plm_smoke_score;

/* Scores the candidate on `ctx` against a base answer (made by
 * plm_smoke_generate with the same vocabulary): teacher-forced through the
 * base's answer, then the candidate's own greedy answer of at most
 * max_tokens from its first divergence on.  Free *out with
 * plm_smoke_score_free, also after a failure. */
PLM_API plm_status plm_smoke_score_answer(plm_context *ctx, const plm_smoke_answer *base, int max_tokens,
                                          plm_smoke_score *out, plm_error *err);
PLM_API void plm_smoke_score_free(plm_smoke_score *s);

/* KL(base || candidate) of one position, as plm_smoke_score_answer computes
 * it: the base's top_k ids and ln p against the candidate's raw logits. */
PLM_API double plm_smoke_kld(const plm_token *top_ids, const float *top_lp, int top_k, const float *logits,
                             int n_vocab);

/* A fingerprint of the vocabulary (every token's text): equal for models
 * that tokenize alike, so a saved base can be checked against a candidate. */
PLM_API uint64_t plm_smoke_vocab_fingerprint(const plm_model *model);

#ifdef __cplusplus
}
#endif

#endif
