/*
 * Tokenizers read from GGUF metadata (tokenizer.ggml.*): SentencePiece
 * ("llama"), byte-level BPE ("gpt2") with the pre-tokenizer that llama.cpp
 * selects by tokenizer.ggml.pre (every name it knows), and Gemma 4's BPE
 * over UTF-8 ("gemma4").  A loaded vocabulary is immutable
 * and safe to use from several threads at once.
 */
#ifndef PLM_TOKENIZER_VOCAB_H
#define PLM_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>

#include "pocketlm.h"
#include "pocketlm_gguf.h"

typedef struct plm_vocab plm_vocab;

/* Copies what it needs: the plm_gguf_file may be closed afterwards. */
plm_vocab *plm_vocab_load(const plm_gguf_file *f, plm_error *err);
void plm_vocab_free(plm_vocab *v);

int plm_vocab_n_tokens(const plm_vocab *v);
plm_token plm_vocab_bos(const plm_vocab *v);  /* -1 when none */
plm_token plm_vocab_eos(const plm_vocab *v);
plm_token plm_vocab_eot(const plm_vocab *v);
bool plm_vocab_is_eog(const plm_vocab *v, plm_token t);
bool plm_vocab_wants_bos(const plm_vocab *v);  /* tokenizer.ggml.add_bos_token */

/* Same contract as plm_tokenize / plm_token_to_piece in pocketlm.h. */
int plm_vocab_tokenize(const plm_vocab *v, const char *text, size_t len,
                       plm_token *out, int max, bool add_special, bool parse_special);
int plm_vocab_token_to_piece(const plm_vocab *v, plm_token t, char *buf,
                             int size, bool special);

#endif
