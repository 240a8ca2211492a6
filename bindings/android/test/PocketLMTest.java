import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.pocketlm.PocketLM;
import org.pocketlm.PocketLMException;
import org.pocketlm.TokenCallback;

/**
 * The Java binding against the library and llama.cpp: stories260K's greedy
 * continuation as llama.cpp writes it (../shared/models/README.md), cancel in
 * mid-stream, two threads generating at once on one shared model, errors as
 * exceptions with the library's message, and 20 load/generate/close cycles
 * without growing RSS.  Usage: PocketLMTest MODEL.gguf
 */
public final class PocketLMTest {
    /* llama.cpp's greedy continuation of "Once upon a time" (../shared/models/README.md). */
    private static final String LLAMA_CPP = ", there was a little girl named Lily. She loved to play outside in the park."
            + " One day, she saw a big, red ball. She wanted to play with it, but it was too high.";

    private static int passed, failed;

    private static void check(boolean ok, String what) {
        if (ok) {
            passed++;
        } else {
            failed++;
            System.err.println("FAILED: " + what);
        }
    }

    private static PocketLM.GenerateParams greedy(int maxTokens) {
        PocketLM.GenerateParams p = new PocketLM.GenerateParams();
        p.temperature = 0;
        p.maxTokens = maxTokens;
        return p;
    }

    private static PocketLM.Params params(boolean mmap) {
        PocketLM.Params p = new PocketLM.Params();
        p.nCtx = 256;
        p.nThreads = 1;
        p.useMmap = mmap;
        return p;
    }

    /** Streams a generation into a string. */
    private static final class Collector implements TokenCallback {
        final StringBuilder text = new StringBuilder();
        final AtomicInteger pieces = new AtomicInteger();
        final CountDownLatch started = new CountDownLatch(5);

        @Override
        public boolean onPiece(String piece) {
            synchronized (text) {
                text.append(piece);
            }
            pieces.incrementAndGet();
            started.countDown();
            return true;
        }

        String text() {
            synchronized (text) {
                return text.toString();
            }
        }
    }

    private static String stream32(String model) throws InterruptedException {
        String text;
        try (PocketLM lm = PocketLM.load(model, params(true))) {
            Collector c = new Collector();
            PocketLM.Stats s = lm.generate("Once upon a time", greedy(32), c).await();
            text = c.text();
            System.out.println("32 greedy tokens: \"" + text + "\"");
            System.out.println("stats: " + lm.stats());
            check(text.length() > 60 && LLAMA_CPP.startsWith(text),
                    "the 32-token greedy text is not llama.cpp's continuation: \"" + text + "\"");
            check(s.generatedTokens == 32 && s.finishReason.equals("length"),
                    "32 tokens, finish length: got " + s.generatedTokens + " " + s.finishReason);
            check(s.promptTokens == 5, "prompt tokens " + s.promptTokens + " (BOS + 4)");
            PocketLM.Stats st = lm.stats();
            check(st.tokensPerSecond > 0 && st.rssBytes > 0 && st.peakRssBytes >= st.rssBytes,
                    "stats: " + st);
            check(st.plan.contains("peak") && st.plan.contains("budget"), "plan: " + st.plan);
        }
        /* The app's own limit binds the plan: 1 MiB is less than the 5 MiB bill. */
        PocketLM.Params tight = params(true);
        tight.memLimitBytes = 1 << 20;
        try (PocketLM small = PocketLM.load(model, tight)) {
            String plan = small.stats().plan;
            System.out.println("plan under a 1 MiB app limit: " + plan);
            check(plan.contains("the app's limit") && !plan.contains("fits in RAM"), "1 MiB limit: " + plan);
        }
        try (PocketLM lm = PocketLM.load(model, params(true))) {
            Collector c = new Collector();
            lm.generate("Once upon a time", greedy(32), c).await();
            check(c.text().equals(text), "a second PocketLM: \"" + c.text() + "\"");
            check(lm.trim(PocketLM.TRIM_WEIGHTS) > 0, "trim released nothing");
            /* Trimmed memory comes back: the same text again. */
            Collector again = new Collector();
            lm.generate("Once upon a time", greedy(32), again).await();
            check(again.text().equals(text), "after trim: \"" + again.text() + "\"");
            return text;
        }
    }

    private static void cancelMidStream(String model) throws InterruptedException {
        try (PocketLM lm = PocketLM.load(model, params(true))) {
            Collector c = new Collector();
            PocketLM.Generation g = lm.generate("Once upon a time", greedy(-1), c);
            c.started.await();
            g.cancel();
            PocketLM.Stats s = g.await();
            System.out.println("cancelled after " + s.generatedTokens + " tokens");
            check(s.finishReason.equals("abort"), "cancelled generation finished as " + s.finishReason);
            check(s.generatedTokens >= 5 && s.generatedTokens < 250, "cancelled at " + s.generatedTokens);

            /* Cancelling from the callback itself, and by returning false. */
            final PocketLM self = lm;
            final AtomicInteger n = new AtomicInteger();
            s = lm.generate("Once upon a time", greedy(-1), new TokenCallback() {
                @Override
                public boolean onPiece(String piece) {
                    if (n.incrementAndGet() == 3) self.cancel();
                    return true;
                }
            }).await();
            check(s.finishReason.equals("abort") && s.generatedTokens <= 4, "cancel in the callback: " + s.generatedTokens);
            s = lm.generate("Once upon a time", greedy(-1), new TokenCallback() {
                @Override
                public boolean onPiece(String piece) {
                    return false;
                }
            }).await();
            check(s.finishReason.equals("abort") && s.generatedTokens == 1, "false from the callback: " + s.generatedTokens);

            /* An exception in the callback stops it and reaches await(). */
            try {
                lm.generate("Once upon a time", greedy(-1), new TokenCallback() {
                    @Override
                    public boolean onPiece(String piece) {
                        throw new IllegalStateException("from the callback");
                    }
                }).await();
                check(false, "the callback's exception was lost");
            } catch (IllegalStateException e) {
                check(e.getMessage().equals("from the callback"), "callback exception: " + e);
            }
        }
    }

    private static void twoThreads(String model, final String solo) throws Exception {
        final PocketLM a = PocketLM.load(model, params(true));
        final PocketLM b = PocketLM.load(model, params(true));
        check(sharedModels() == 1, "two PocketLMs on one file hold " + sharedModels() + " models");
        Collector ca = new Collector(), cb = new Collector();
        PocketLM.Generation ga = a.generate("Once upon a time", greedy(32), ca);
        PocketLM.Generation gb = b.generate("Once upon a time", greedy(32), cb);
        ga.await();
        gb.await();
        check(ca.text().equals(solo) && cb.text().equals(solo),
                "concurrent texts differ from the solo one: \"" + ca.text() + "\" / \"" + cb.text() + "\"");
        a.close();
        check(sharedModels() == 1, "the model went with the first close");
        b.close();
        check(sharedModels() == 0, "the model outlived its last close");
        try {
            b.generate("x", greedy(1), new Collector());
            check(false, "generate after close");
        } catch (IllegalStateException e) {
            check(true, "");
        }
        b.close(); /* twice: nothing */
    }

    /* The model inside a bigger file, as in an APK: loadFd with its range. */
    private static void loadFromDescriptor(String model, String solo) throws Exception {
        byte[] bytes = java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(model));
        java.io.File container = java.io.File.createTempFile("pocketlm-apk", ".bin");
        container.deleteOnExit();
        final int lead = 4096 + 32;
        try (java.io.FileOutputStream out = new java.io.FileOutputStream(container)) {
            out.write(new byte[lead]);
            out.write(bytes);
            out.write(new byte[100]);
        }
        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(container, "r")) {
            java.lang.reflect.Field fdField = java.io.FileDescriptor.class.getDeclaredField("fd");
            fdField.setAccessible(true);  /* on Android: ParcelFileDescriptor.getFd() */
            int fd = fdField.getInt(f.getFD());
            PocketLM a = PocketLM.loadFd(fd, lead, bytes.length, params(true));
            PocketLM b = PocketLM.loadFd(fd, lead, bytes.length, params(false));
            check(sharedModels() == 1, "two loads of one range hold " + sharedModels() + " models");
            Collector c = new Collector();
            a.generate("Once upon a time", greedy(32), c).await();
            check(c.text().equals(solo), "loadFd text: \"" + c.text() + "\"");
            check(b.stats().plan.contains("no plan"), "loadFd plan: " + b.stats().plan);
            a.close();
            b.close();
            try {
                PocketLM.loadFd(fd, lead + 1, bytes.length, null);
                check(false, "a wrong offset loaded");
            } catch (PocketLMException e) {
                System.out.println("wrong offset: " + e.getMessage());
                check(e.code() == 2 && e.getMessage().startsWith("fd "), "wrong offset: " + e.getMessage());
            }
        }
        check(sharedModels() == 0, "models left after loadFd: " + sharedModels());
    }

    private static void errors(String model) {
        try {
            PocketLM.load("/nonexistent/model.gguf", null);
            check(false, "loading a missing file");
        } catch (PocketLMException e) {
            System.out.println("missing file: " + e.getMessage());
            check(e.code() == 1 && e.getMessage().contains("/nonexistent/model.gguf"), "missing file: " + e.getMessage());
        }
        try {
            PocketLM.load(new java.io.File(model).getParent() + "/README.md", null);
            check(false, "loading a text file");
        } catch (PocketLMException e) {
            System.out.println("not a GGUF: " + e.getMessage());
            check(e.code() == 2 && e.getMessage().contains("README.md"), "not a GGUF: " + e.getMessage());
        }
        PocketLM.GenerateParams bad = greedy(4);
        bad.topP = 2;
        try (PocketLM lm = PocketLM.load(model, params(true))) {
            lm.generate("Once", bad, new Collector()).await();
            check(false, "top_p 2 accepted");
        } catch (PocketLMException e) {
            check(e.code() == 5 && e.getMessage().contains("top_p"), "bad top_p: " + e.getMessage());
        } catch (InterruptedException e) {
            check(false, "interrupted");
        }
    }

    private static void loadCloseCycles(String model) throws InterruptedException {
        long base = 0;
        for (int i = 0; i < 20; i++) {
            try (PocketLM lm = PocketLM.load(model, params(false))) { /* read into memory: a leak shows */
                lm.generate("Once upon a time", greedy(8), new Collector()).await();
            }
            if (i == 2) {
                System.gc();
                base = PocketLM.processRssBytes();
            }
        }
        System.gc();
        long end = PocketLM.processRssBytes();
        System.out.printf("RSS after 3 load/close cycles %.1f MiB, after 20 %.1f MiB%n", base / 1048576.0,
                end / 1048576.0);
        /* The model alone is 1.2 MiB read into memory: 17 leaked copies would add 20 MiB. */
        check(base > 0 && end - base < 6L * 1048576, "RSS grew by " + (end - base) + " bytes over 17 cycles");
        check(sharedModels() == 0, "models left loaded: " + sharedModels());
    }

    private static int sharedModels() {
        try {
            java.lang.reflect.Method m = PocketLM.class.getDeclaredMethod("sharedModels");
            m.setAccessible(true);
            return (Integer) m.invoke(null);
        } catch (ReflectiveOperationException e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        String model = args[0];
        check(PocketLM.version().matches("\\d+\\.\\d+\\.\\d+"), "version " + PocketLM.version());
        String solo = stream32(model);
        cancelMidStream(model);
        twoThreads(model, solo);
        loadFromDescriptor(model, solo);
        errors(model);
        loadCloseCycles(model);
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 && passed > 0 ? 0 : 1);
    }
}
