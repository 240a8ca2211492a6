/* Reasoning models (Qwen3) think inside <think>...</think> before they
 * answer.  This filter sits between the generated text and the terminal: it
 * shows the thinking dimmed (ANSI faint) on a terminal, as plain text on a
 * pipe, or drops it.  Tags may arrive split across pieces, so a possible
 * partial tag is held back until it completes or turns out to be text. */
#ifndef PLM_TOOLS_CHAT_THINK_H
#define PLM_TOOLS_CHAT_THINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct think_filter {
    FILE *out;
    bool hide;      /* drop the thinking */
    bool faint;     /* show it dimmed (a terminal) rather than with its tags */
    bool inside;    /* between <think> and </think> */
    char pending[16];
    size_t n_pending;
} think_filter;

void think_init(think_filter *f, FILE *out, bool hide, bool faint);
void think_feed(think_filter *f, const char *text, size_t len);
/* Releases a held partial tag and ends the faint style. */
void think_flush(think_filter *f);

#endif
