/*
 * One generation's state, shared by plm_generate (generate.c: the whole
 * loop in one call) and plm_gen (gen_step.c: the same loop a step at a
 * time, several sequences per forward pass).  The pieces are the loop's:
 * prefill a piece of the prompt, take the next token, turn it into text,
 * make room in a full sequence.
 */
#ifndef PLM_RUNTIME_GEN_H
#define PLM_RUNTIME_GEN_H

#include "runtime/context.h"
#include "runtime/stop.h"

/* The most tokens one speculative step may hand back (its draft_max + 1). */
enum { SPEC_QUEUE = 65 };

typedef struct gen {
    plm_context *ctx;
    const plm_model *model;
    plm_seq_id seq;
    plm_sampler *smp;
    const plm_generate_params *p;
    plm_piece_cb on_piece;
    plm_generate_result *r;
    plm_stop *stop;
    const float *logits; /* the row the next token is sampled from; NULL: the context's last */
    char held[4];        /* the start of an incomplete UTF-8 character */
    size_t n_held;
    char *work;          /* held bytes + one token's piece */
    size_t work_cap;
    int n_keep;          /* resolved params->n_keep */
    bool done;           /* finish reason set */
    plm_token queue[SPEC_QUEUE]; /* tokens a speculative step accepted, not yet taken */
    int n_queue, q_at;
} gen;

double gen_now(void);
/* The caller's plm_generate_params (any version of the struct; NULL:
 * defaults) as this library's struct. */
plm_status gen_take_params(plm_generate_params *dst, const plm_generate_params *src, plm_error *err);
/* Checks the arguments (plm_generate's rules), sets up the stop matcher and
 * feeds the prompt to the sampler's penalty window.  gen_end frees. */
plm_status gen_begin(gen *g, plm_context *ctx, plm_seq_id seq, const plm_token *prompt, int n_prompt,
                     plm_sampler *sampler, const plm_generate_params *params, plm_piece_cb on_piece,
                     plm_generate_result *result, plm_error *err);
void gen_end(gen *g);
/* Ends the generation for `why` unless it has ended. */
void gen_finish(gen *g, plm_finish_reason why);
/* Polls params->abort; true once the generation has ended. */
bool gen_aborted(gen *g);
/* Evaluates prompt[0..n) in sequence g->seq (counted in result.n_prompt). */
plm_status gen_decode_prompt(gen *g, const plm_token *prompt, int n, plm_error *err);
/* The next token (sampled from g->logits, or the speculative queue's). */
plm_token gen_next_token(gen *g);
/* Handles a produced token; false when the generation ends with it. */
bool gen_take_token(gen *g, plm_token t, plm_status *st, plm_error *err);
/* A full sequence: shift it (params->ctx_shift) or end the generation. */
plm_status gen_make_room(gen *g, plm_error *err);
/* Releases the text still held at the end. */
void gen_flush_text(gen *g);

#endif
