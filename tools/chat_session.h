/* A conversation of pocketlm chat: the messages, the tokens in the KV cache,
 * and the turn that renders the whole conversation, keeps the longest common
 * token prefix already cached and evaluates only the rest. */
#ifndef PLM_TOOLS_CHAT_SESSION_H
#define PLM_TOOLS_CHAT_SESSION_H

#include <jansson.h>
#include <stdbool.h>

#include "pocketlm.h"
#include "pocketlm_chat.h"

typedef struct chat_session {
    plm_model *model;
    plm_context *ctx;
    const plm_chat_template *tmpl;
    const char *bos, *eos;      /* the model's special token texts, or NULL */
    const char *vars_json;      /* extra template variables, or NULL */
    json_t *messages;           /* [{"role", "content"}...], the system prompt first */
    plm_token *cached;          /* what the KV cache holds, n_past of them valid */
    int cap_cached;
    int reserve;                /* context kept free for an answer */
    bool verbose;
} chat_session;

/* Per-turn numbers, logged with --verbose and read by the tests. */
typedef struct chat_turn_stats {
    int n_prompt;     /* tokens of the rendered conversation */
    int n_reused;     /* of which were already in the cache */
    int n_evaluated;  /* prompt tokens evaluated this turn */
    int n_dropped;    /* messages dropped by compaction */
} chat_turn_stats;

void chat_session_init(chat_session *s, plm_model *model, plm_context *ctx, const plm_chat_template *tmpl,
                       const char *system_prompt);
void chat_session_free(chat_session *s);
/* Forgets the conversation (the system prompt stays) and the cache. */
void chat_session_clear(chat_session *s);

/* Adds the user's message and answers it: the answer streams through
 * on_piece (gp->user is its user pointer) and is kept in the history, also
 * when it was stopped.  Returns false with err set when no answer could be
 * made (the message is then not kept). */
bool chat_session_turn(chat_session *s, const char *user_text, plm_sampler *smp, plm_generate_params gp,
                       plm_piece_cb on_piece, plm_generate_result *res, chat_turn_stats *stats, plm_error *err);

/* /save and /load: the history as JSON in PATH and the KV cache in PATH.kv
 * (each written to a temp file, then renamed).  chat_session_load replaces
 * the history; chat_session_load_kv then restores the cache, so the next
 * turn evaluates only its new tokens (without it, or when it fails, the
 * next turn evaluates the history again). */
bool chat_session_save(const chat_session *s, const char *path, plm_error *err);
bool chat_session_load(chat_session *s, const char *path, plm_error *err);
bool chat_session_load_kv(chat_session *s, const char *path, plm_error *err);

#endif
