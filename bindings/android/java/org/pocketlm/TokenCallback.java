package org.pocketlm;

/** Receives generated text as it is produced, on the generation's worker thread. */
public interface TokenCallback {
    /**
     * One piece of text: whole UTF-8 characters (a character split across
     * tokens arrives once it is complete).  Return false to stop the
     * generation (it then finishes as "abort").  An exception thrown here
     * stops the generation and is rethrown by {@link PocketLM.Generation#await}.
     */
    boolean onPiece(String piece);
}
