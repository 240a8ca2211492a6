/* The <think> filter of pocketlm chat (chat_think.h says what it does). */
#include "chat_think.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

void think_init(think_filter *f, FILE *out, bool hide, bool faint) {
    memset(f, 0, sizeof *f);
    f->out = out;
    f->hide = hide;
    f->faint = faint;
}

static void emit(think_filter *f, const char *s, size_t n) {
    if (f->inside && f->hide) return;
    fwrite(s, 1, n, f->out);
}

/* The tag is complete: switch style instead of printing it (or print it on
 * a pipe, where the tags themselves are what marks the thinking). */
static void toggle(think_filter *f) {
    const char *tag = f->inside ? CLOSE : OPEN;
    if (!f->hide) {
        if (f->faint) fputs(f->inside ? "\033[0m" : "\033[2m", f->out);
        else fputs(tag, f->out);
    }
    f->inside = !f->inside;
}

static bool pending_is_tag_prefix(const think_filter *f) {
    const char *tag = f->inside ? CLOSE : OPEN;
    return f->n_pending <= strlen(tag) && !memcmp(f->pending, tag, f->n_pending);
}

void think_feed(think_filter *f, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        f->pending[f->n_pending++] = text[i];
        /* Release bytes from the front until what is held may start a tag. */
        while (f->n_pending && !pending_is_tag_prefix(f)) {
            emit(f, f->pending, 1);
            memmove(f->pending, f->pending + 1, --f->n_pending);
        }
        if (f->n_pending == strlen(f->inside ? CLOSE : OPEN)) {
            toggle(f);
            f->n_pending = 0;
        }
    }
    fflush(f->out);
}

void think_flush(think_filter *f) {
    emit(f, f->pending, f->n_pending);
    f->n_pending = 0;
    if (f->inside && f->faint && !f->hide) fputs("\033[0m", f->out);
    f->inside = false;
    fflush(f->out);
}
