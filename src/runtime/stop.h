/*
 * Stop strings over streamed text.  Generated text arrives piece by piece
 * (one token's bytes at a time) and a stop string may straddle pieces, so
 * the matcher holds back any tail that could still become a stop string and
 * releases it once it cannot.
 *
 *     plm_stop *m = plm_stop_new(stops, n_stops);
 *     for each generated piece:
 *         plm_stop_out o = plm_stop_feed(m, piece, len);
 *         fwrite(o.text, 1, o.len, stdout);
 *         if (o.stop >= 0) break;         // stop string o.stop completed
 *     if no stop string ended it:
 *         o = plm_stop_flush(m);          // release the held-back tail
 *         fwrite(o.text, 1, o.len, stdout);
 *
 * The text a stop string completes is never released, nor anything after it
 * in the same piece.  Matching is byte-wise (stop strings are UTF-8 like the
 * text, so a byte match is a character match).  Empty stop strings are
 * ignored.  With no stop strings every piece is released whole.
 */
#ifndef PLM_RUNTIME_STOP_H
#define PLM_RUNTIME_STOP_H

/* The API is public: see pocketlm.h.  This header documents the details. */
#include "pocketlm.h"

#endif
