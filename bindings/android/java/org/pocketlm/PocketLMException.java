package org.pocketlm;

import java.nio.charset.StandardCharsets;

/** A library error: the plm_status code and the library's own message. */
public class PocketLMException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** PLM_ERR_ABORTED: a generation or a load was cancelled. */
    public static final int ABORTED = 7;

    private final int code;

    public PocketLMException(int code, String message) {
        super(message);
        this.code = code;
    }

    /* From native code: the message arrives as UTF-8 bytes (JNI's own string
     * conversion expects modified UTF-8, which a file name may not be). */
    PocketLMException(int code, byte[] message) {
        this(code, new String(message, StandardCharsets.UTF_8));
    }

    /** The library's plm_status (1 i/o, 2 format, 3 unsupported, 4 memory, 5 argument, 6 context full, 7 aborted). */
    public int code() {
        return code;
    }
}
