package org.pocketlm;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * A pocketlm model for an app: load it, stream generations from it on a
 * worker thread, cancel them, read their speed and the process's memory,
 * give memory back under pressure, close it.
 *
 * <p>One PocketLM is one conversation slot: its generations run one at a time
 * (a second waits for the first).  Open another PocketLM on the same file to
 * generate in parallel: the weights are loaded once and shared by every
 * PocketLM on that file, reference-counted, and freed when the last one
 * closes.  Library errors are {@link PocketLMException}s carrying the
 * library's message.
 */
public final class PocketLM implements AutoCloseable {
    static {
        System.loadLibrary("pocketlm_jni");
    }

    /** How to load: see plm_model_params and plm_context_params. */
    public static final class Params {
        /** Map the weights from the file (default) instead of reading them into memory. */
        public boolean useMmap = true;
        /** KV cache length in tokens; 0 = min(trained, 4096). */
        public int nCtx = 0;
        /** Threads; 0 = the performance cores. */
        public int nThreads = 0;
        /**
         * The app's own memory limit for the plan in stats(), 0 = none: on Android
         * ActivityManager.MemoryInfo.availMem - threshold (plm_probe_budget).
         */
        public long memLimitBytes = 0;
    }

    /** One generation: see plm_sampler_params and plm_generate_params. */
    public static final class GenerateParams {
        public int maxTokens = 256;
        /** 0 = greedy. */
        public float temperature = 0.8f;
        public int topK = 40;
        public float topP = 0.95f;
        public float minP = 0.05f;
        public float repeatPenalty = 1.0f;
        public long seed = 0x5eed;
        /** Text that ends the generation (never streamed); may be null. */
        public String[] stops;
    }

    /** What the last finished generation did, and the process's memory now. */
    public static final class Stats {
        public int promptTokens;
        public int generatedTokens;
        public double promptTokensPerSecond;
        public double tokensPerSecond;
        /** "length", "eog", "stop", "abort", "context", or "" before any generation. */
        public String finishReason = "";
        public long rssBytes;
        public long peakRssBytes;
        /** The memory plan for this model and context against this process's budget. */
        public String plan = "";

        @Override
        public String toString() {
            return String.format("%d prompt tokens (%.1f/s), %d generated (%.1f/s), %s; RSS %.1f MiB (peak %.1f); %s",
                    promptTokens, promptTokensPerSecond, generatedTokens, tokensPerSecond, finishReason,
                    rssBytes / 1048576.0, peakRssBytes / 1048576.0, plan);
        }
    }

    /** A generation running on its worker thread. */
    public final class Generation {
        private final Thread thread;
        private final long id;
        private volatile Stats stats;
        private volatile Throwable failure;

        private Generation(final long id, final byte[] prompt, final GenerateParams p, final TokenCallback cb) {
            this.id = id;
            final byte[][] stops = encode(p.stops);
            thread = new Thread(new Runnable() {
                @Override
                public void run() {
                    try {
                        double[] r = nativeGenerate(handle(), id, prompt, p.maxTokens, p.temperature, p.topK, p.topP,
                                p.minP, p.repeatPenalty, p.seed, stops, cb);
                        stats = finished(r);
                    } catch (Throwable t) {
                        failure = t;
                    }
                }
            }, "pocketlm-generate");
            thread.start();
        }

        /** Stops the generation at the next token or layer; await() then returns with finishReason "abort". */
        public void cancel() {
            synchronized (lock) {
                if (handle != 0) nativeCancel(handle, id, false);
            }
        }

        public boolean isDone() {
            return !thread.isAlive();
        }

        /** Waits for the end; the generation's stats, or its error (or the callback's exception). */
        public Stats await() throws InterruptedException {
            thread.join();
            Throwable f = failure;
            if (f instanceof RuntimeException) throw (RuntimeException) f;
            if (f instanceof Error) throw (Error) f;
            if (f != null) throw new RuntimeException(f);
            return stats;
        }
    }

    private long handle;
    private final Object lock = new Object();
    private final List<Generation> started = new ArrayList<Generation>(); /* not yet seen finished */
    private boolean closing;
    private long issued; /* generations started: their ids are 1..issued */
    private volatile Stats last = new Stats();

    private PocketLM(long handle) {
        this.handle = handle;
    }

    /** Loads `path` (or takes another reference to it when it is loaded already). */
    public static PocketLM load(String path, Params params) {
        Params p = params != null ? params : new Params();
        return new PocketLM(nativeLoad(path.getBytes(StandardCharsets.UTF_8), p.useMmap, p.nCtx, p.nThreads,
                p.memLimitBytes));
    }

    /**
     * Loads the GGUF image at bytes [offset, offset + length) of an open file:
     * a model stored uncompressed in the APK or an asset pack
     * ({@code AssetFileDescriptor}: {@code getParcelFileDescriptor().getFd()},
     * {@code getStartOffset()}, {@code getLength()}).  The descriptor stays the
     * caller's (close it when this returns).  PocketLMs on the same range of the
     * same file share one model.  stats().plan is not computed for these.
     */
    public static PocketLM loadFd(int fd, long offset, long length, Params params) {
        Params p = params != null ? params : new Params();
        return new PocketLM(nativeLoadFd(fd, offset, length, p.useMmap, p.nCtx, p.nThreads));
    }

    /**
     * Starts generating the continuation of `prompt` on a worker thread,
     * streaming it to `callback`.  A generation already running on this
     * PocketLM finishes first.
     */
    public Generation generate(String prompt, GenerateParams params, TokenCallback callback) {
        GenerateParams p = params != null ? params : new GenerateParams();
        synchronized (lock) {
            if (closing) throw new IllegalStateException("PocketLM is closing");
            handle();
            for (Iterator<Generation> it = started.iterator(); it.hasNext();)
                if (it.next().isDone()) it.remove();
            Generation g = new Generation(++issued, prompt.getBytes(StandardCharsets.UTF_8), p, callback);
            started.add(g);
            return g;
        }
    }

    /** Stops every generation started on this PocketLM so far, running or waiting. */
    public void cancel() {
        synchronized (lock) {
            if (handle != 0) nativeCancel(handle, issued, true);
        }
    }

    /** The last finished generation's numbers, the process's memory now and the plan. */
    public Stats stats() {
        Stats s = new Stats();
        Stats l = last;
        s.promptTokens = l.promptTokens;
        s.generatedTokens = l.generatedTokens;
        s.promptTokensPerSecond = l.promptTokensPerSecond;
        s.tokensPerSecond = l.tokensPerSecond;
        s.finishReason = l.finishReason;
        long[] mem = nativeMemory();
        s.rssBytes = mem[0];
        s.peakRssBytes = mem[1];
        synchronized (lock) {
            s.plan = nativePlan(handle());
        }
        return s;
    }

    /** plm_trim_level: scratch buffers and idle threads. */
    public static final int TRIM_SCRATCH = 0;
    /** ... and KV cache pages past the cached tokens. */
    public static final int TRIM_KV = 1;
    /** ... and the resident pages of the mapped weights. */
    public static final int TRIM_WEIGHTS = 2;

    /**
     * Gives back memory that can be rebuilt (for onTrimMemory).  Never waits:
     * during a generation the trim is done when it ends, and 0 is returned.
     * Returns the bytes released.
     */
    public long trim(int level) {
        synchronized (lock) {
            return nativeTrim(handle(), level);
        }
    }

    /** Cancels a running generation, waits for it, and drops this reference to the model. */
    @Override
    public void close() {
        List<Generation> running;
        long h;
        synchronized (lock) {
            if (handle == 0 || closing) return;
            closing = true;
            nativeCancel(handle, issued, true);
            running = new ArrayList<Generation>(started);
            h = handle;
        }
        boolean interrupted = false;
        for (Generation g : running) {
            while (true) {
                try {
                    g.thread.join();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
        synchronized (lock) {
            handle = 0;
            started.clear();
        }
        nativeClose(h);
    }

    /** The library's version, e.g. "0.1.0". */
    public static String version() {
        return nativeVersion();
    }

    /** This process's resident memory in bytes (VmRSS), 0 if unknown. */
    public static long processRssBytes() {
        return nativeMemory()[0];
    }

    private long handle() {
        synchronized (lock) {
            if (handle == 0) throw new IllegalStateException("PocketLM is closed");
            return handle;
        }
    }

    private Stats finished(double[] r) {
        Stats s = new Stats();
        s.promptTokens = (int) r[0];
        s.generatedTokens = (int) r[1];
        s.promptTokensPerSecond = r[2] > 0 ? r[0] / r[2] : 0;
        s.tokensPerSecond = r[3] > 0 ? r[1] / r[3] : 0;
        s.finishReason = FINISH[(int) r[4]];
        last = s;
        return s;
    }

    private static final String[] FINISH = {"length", "eog", "stop", "abort", "context"};

    private static byte[][] encode(String[] strings) {
        if (strings == null) return null;
        byte[][] b = new byte[strings.length][];
        for (int i = 0; i < strings.length; i++) b[i] = strings[i].getBytes(StandardCharsets.UTF_8);
        return b;
    }

    /* Called by native code with each piece's UTF-8 bytes. */
    private static boolean deliver(TokenCallback cb, byte[] piece) {
        return cb.onPiece(new String(piece, StandardCharsets.UTF_8));
    }

    private static native long nativeLoadFd(int fd, long offset, long length, boolean useMmap, int nCtx,
            int nThreads);

    private static native long nativeLoad(byte[] path, boolean useMmap, int nCtx, int nThreads, long memLimit);

    /* {prompt tokens, generated tokens, prompt seconds, generation seconds, finish reason} */
    private static native double[] nativeGenerate(long handle, long id, byte[] prompt, int maxTokens, float temperature, int topK,
            float topP, float minP, float repeatPenalty, long seed, byte[][] stops, TokenCallback cb);

    /* Cancels generation `id`, or with `upTo` every generation up to it. */
    private static native void nativeCancel(long handle, long id, boolean upTo);

    private static native long nativeTrim(long handle, int level);

    private static native String nativePlan(long handle);

    private static native long[] nativeMemory();

    private static native void nativeClose(long handle);

    private static native String nativeVersion();

    /* Files loaded now (for tests: sharing and freeing). */
    private static native int sharedModels();
}
