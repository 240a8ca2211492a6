/*
 * The JNI side of org.pocketlm.PocketLM (bindings/android/java).
 *
 * A PocketLM is a session: a reference to a shared model plus its own
 * context, reused by its generations one at a time.  Models are shared by
 * file: a registry maps each file to one loaded plm_model and a count of the
 * sessions holding it; the last close frees it.
 *
 * Generation runs on the Java worker thread that calls nativeGenerate, through
 * the library's own loop (plm_generate): it streams whole UTF-8 characters,
 * and its abort callback, like the context's (polled before every layer of
 * the prompt's forward passes), reads the session's cancel marks, so cancel()
 * and close() stop it within a layer.  Text crosses to Java as byte[] (JNI's
 * string functions speak modified UTF-8, which mangles 4-byte characters).
 */
#include <jni.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pocketlm.h"
#include "pocketlm_plan.h"

/* ---- errors --------------------------------------------------------------- */

static void throw_error(JNIEnv *env, plm_status code, const char *message) {
    jclass cls = (*env)->FindClass(env, "org/pocketlm/PocketLMException");
    if (!cls) return; /* NoClassDefFoundError is pending */
    jmethodID ctor = (*env)->GetMethodID(env, cls, "<init>", "(I[B)V");
    jsize len = (jsize)strlen(message);
    jbyteArray bytes = (*env)->NewByteArray(env, len);
    if (!ctor || !bytes) return;
    (*env)->SetByteArrayRegion(env, bytes, 0, len, (const jbyte *)message);
    jobject e = (*env)->NewObject(env, cls, ctor, (jint)code, bytes);
    if (e) (*env)->Throw(env, (jthrowable)e);
}

static void throw_plm(JNIEnv *env, const plm_error *err) { throw_error(env, err->code, err->message); }

/* A byte[] as a NUL-terminated malloc'd string (NULL: out of memory, thrown). */
static char *bytes_dup(JNIEnv *env, jbyteArray a, size_t *len_out) {
    jsize len = a ? (*env)->GetArrayLength(env, a) : 0;
    char *s = malloc((size_t)len + 1);
    if (!s) {
        throw_error(env, PLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (len) (*env)->GetByteArrayRegion(env, a, 0, len, (jbyte *)s);
    s[len] = '\0';
    if (len_out) *len_out = (size_t)len;
    return s;
}

/* ---- shared models ----------------------------------------------------------- */

typedef struct shared_model {
    char *key;         /* the file's real path */
    plm_model *model;
    int refs;
    struct shared_model *next;
} shared_model;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_model *registry;

/* Where a model comes from: a path, or a range of an open file. */
typedef struct model_source {
    const char *path; /* or NULL: */
    int fd;
    uint64_t offset, length;
} model_source;

static plm_status load_source(const model_source *src, bool use_mmap, plm_model **out, plm_error *err) {
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = use_mmap;
    return src->path ? plm_model_load(src->path, &mp, out, err)
                     : plm_model_load_fd(src->fd, src->offset, src->length, &mp, out, err);
}

/* The registry's name for a source: the real path, or the file's device and
 * inode with the range (two descriptors of one asset share its model). */
static bool source_key(const model_source *src, char *key, size_t size) {
    if (src->path) {
        char real[PATH_MAX];
        snprintf(key, size, "%s", realpath(src->path, real) ? real : src->path);
        return true;
    }
    struct stat st;
    if (fstat(src->fd, &st) != 0) return false;
    snprintf(key, size, "fd:%llu:%llu:%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
             (unsigned long long)src->offset, (unsigned long long)src->length);
    return true;
}

/* The model of `src`, loaded now or shared; NULL with err filled. */
static shared_model *model_acquire(const model_source *src, bool use_mmap, plm_error *err) {
    char key[PATH_MAX + 32];
    if (!source_key(src, key, sizeof key)) {
        snprintf(err->message, sizeof err->message, "fd %d: cannot stat it", src->fd);
        err->code = PLM_ERR_IO;
        return NULL;
    }
    pthread_mutex_lock(&registry_lock);
    shared_model *sm = registry;
    while (sm && strcmp(sm->key, key) != 0) sm = sm->next;
    if (sm) {
        sm->refs++;
    } else if ((sm = calloc(1, sizeof *sm)) && (sm->key = strdup(key))) {
        if (load_source(src, use_mmap, &sm->model, err) == PLM_OK) {
            sm->refs = 1;
            sm->next = registry;
            registry = sm;
        } else {
            free(sm->key);
            free(sm);
            sm = NULL;
        }
    } else {
        free(sm);
        sm = NULL;
        snprintf(err->message, sizeof err->message, "out of memory");
        err->code = PLM_ERR_NOMEM;
    }
    pthread_mutex_unlock(&registry_lock);
    return sm;
}

static void model_release(shared_model *sm) {
    pthread_mutex_lock(&registry_lock);
    if (--sm->refs == 0) {
        shared_model **p = &registry;
        while (*p != sm) p = &(*p)->next;
        *p = sm->next;
        plm_model_free(sm->model);
        free(sm->key);
        free(sm);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* ---- sessions ------------------------------------------------------------------ */

typedef struct session {
    shared_model *sm;
    plm_context_params cp;
    plm_context *ctx;          /* created by the first generation, then reused */
    pthread_mutex_t busy;      /* held by a generation, a trim, or close */
    atomic_llong running;      /* id of the generation in progress, 0 = none */
    atomic_llong cancel_upto;  /* every generation with an id up to this stops */
    atomic_llong cancel_one;   /* ... and this one */
    atomic_int pending_trim;   /* a trim asked for during a generation; -1 = none */
    char plan[768];            /* the memory bill against the budget, for stats() */
} session;

static bool cancelled(void *user) {
    session *s = user;
    long long id = atomic_load(&s->running);
    return id <= atomic_load(&s->cancel_upto) || id == atomic_load(&s->cancel_one);
}

static void describe_plan(session *s, const char *path, uint64_t mem_limit) {
    plm_plan_params pp = plm_plan_default_params();
    pp.n_ctx = s->cp.n_ctx;
    pp.n_threads = s->cp.n_threads;
    pp.use_mmap = true;
    plm_plan plan;
    plm_mem_budget budget;
    plm_error err;
    if (plm_plan_file(path, &pp, &plan, &err) != PLM_OK) {
        snprintf(s->plan, sizeof s->plan, "no plan: %s", err.message);
        return;
    }
    const double mib = 1024.0 * 1024.0;
    int n = snprintf(s->plan, sizeof s->plan,
                     "peak %.1f MiB at %u tokens (weights %.1f, KV %.1f, scratch %.1f, other %.1f)",
                     plan.peak_rss / mib, plan.params.n_ctx, plan.weights_resident / mib, plan.kv_bytes / mib,
                     plan.scratch_bytes / mib,
                     (plan.vocab_bytes + plan.model_bytes + plan.overhead_bytes) / mib);
    if (n > 0 && (size_t)n < sizeof s->plan && plm_probe_budget(mem_limit, &budget, &err) == PLM_OK)
        snprintf(s->plan + n, sizeof s->plan - (size_t)n, "; budget %.1f MiB (%s): %s", budget.bytes / mib,
                 budget.source, plan.peak_rss <= budget.bytes ? "fits in RAM"
                                : plan.anon_bytes <= budget.bytes ? "runs by paging weights from storage"
                                                                  : "does not fit");
}

/* A session on `src` (NULL with a pending exception). */
static session *session_open(JNIEnv *env, const model_source *src, jboolean use_mmap, jint n_ctx, jint n_threads,
                             jlong mem_limit) {
    if (n_ctx < 0 || n_threads < 0 || mem_limit < 0) {
        throw_error(env, PLM_ERR_INVALID_ARG, "nCtx, nThreads and memLimitBytes must be >= 0");
        return NULL;
    }
    session *s = calloc(1, sizeof *s);
    plm_error err = {0};
    if (!s) {
        throw_error(env, PLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->sm = model_acquire(src, use_mmap, &err);
    if (!s->sm) {
        free(s);
        throw_plm(env, &err);
        return NULL;
    }
    s->cp = plm_context_default_params();
    s->cp.n_ctx = (uint32_t)n_ctx;
    s->cp.n_threads = (uint32_t)n_threads;
    s->cp.abort = cancelled;
    s->cp.abort_user = s;
    pthread_mutex_init(&s->busy, NULL);
    atomic_init(&s->running, 0);
    atomic_init(&s->cancel_upto, 0);
    atomic_init(&s->cancel_one, 0);
    atomic_init(&s->pending_trim, -1);
    if (src->path) describe_plan(s, src->path, (uint64_t)mem_limit);
    else snprintf(s->plan, sizeof s->plan, "no plan for a model loaded from a descriptor range");
    return s;
}

JNIEXPORT jlong JNICALL Java_org_pocketlm_PocketLM_nativeLoad(JNIEnv *env, jclass cls, jbyteArray jpath,
                                                              jboolean use_mmap, jint n_ctx, jint n_threads,
                                                              jlong mem_limit) {
    (void)cls;
    char *path = bytes_dup(env, jpath, NULL);
    if (!path) return 0;
    const model_source src = {.path = path, .fd = -1};
    session *s = session_open(env, &src, use_mmap, n_ctx, n_threads, mem_limit);
    free(path);
    return (jlong)(intptr_t)s;
}

JNIEXPORT jlong JNICALL Java_org_pocketlm_PocketLM_nativeLoadFd(JNIEnv *env, jclass cls, jint fd, jlong offset,
                                                                jlong length, jboolean use_mmap, jint n_ctx,
                                                                jint n_threads) {
    (void)cls;
    if (fd < 0 || offset < 0 || length < 0) {
        throw_error(env, PLM_ERR_INVALID_ARG, "loadFd: fd, offset and length must be >= 0");
        return 0;
    }
    const model_source src = {.fd = fd, .offset = (uint64_t)offset, .length = (uint64_t)length};
    return (jlong)(intptr_t)session_open(env, &src, use_mmap, n_ctx, n_threads, 0);
}

/* ---- generation ------------------------------------------------------------------ */

/* plm_generate's user pointer: what on_piece and the abort callback need. */
typedef struct stream {
    session *s;
    JNIEnv *env;
    jobject cb;
    jclass cls;
    jmethodID deliver;
} stream;

/* plm_generate's text: to TokenCallback.onPiece via PocketLM.deliver. */
static bool on_piece(void *user, const char *text, size_t len) {
    stream *st = user;
    JNIEnv *env = st->env;
    jbyteArray b = (*env)->NewByteArray(env, (jsize)len);
    if (!b) return false;
    (*env)->SetByteArrayRegion(env, b, 0, (jsize)len, (const jbyte *)text);
    jboolean go = (*env)->CallStaticBooleanMethod(env, st->cls, st->deliver, st->cb, b);
    (*env)->DeleteLocalRef(env, b);
    return !(*env)->ExceptionCheck(env) && go;
}

static bool stream_cancelled(void *user) { return cancelled(((stream *)user)->s); }

static void apply_pending_trim(session *s) {
    int level = atomic_exchange(&s->pending_trim, -1);
    if (level >= 0 && s->ctx) plm_context_trim(s->ctx, (plm_trim_level)level);
}

/* The stop strings as C strings (freed by free_stops). */
static char **copy_stops(JNIEnv *env, jobjectArray jstops, int *n_out) {
    *n_out = jstops ? (*env)->GetArrayLength(env, jstops) : 0;
    char **stops = calloc((size_t)*n_out + 1, sizeof *stops);
    for (int i = 0; stops && i < *n_out; i++) {
        jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, jstops, i);
        stops[i] = bytes_dup(env, b, NULL);
        (*env)->DeleteLocalRef(env, b);
        if (!stops[i]) {
            for (int j = 0; j < i; j++) free(stops[j]);
            free(stops);
            return NULL;
        }
    }
    return stops;
}

static void free_stops(char **stops, int n) {
    for (int i = 0; stops && i < n; i++) free(stops[i]);
    free(stops);
}

/* Tokenizes and generates on the session's context; PLM_OK or err filled. */
static plm_status run_generation(session *s, const char *prompt, size_t prompt_len, const plm_sampler_params *sp,
                                 const plm_generate_params *gp, plm_generate_result *r, plm_error *err) {
    const plm_model *m = s->sm->model;
    plm_status rc = PLM_OK;
    if (!s->ctx) rc = plm_context_new(s->sm->model, &s->cp, &s->ctx, err);
    if (rc) return rc;
    plm_kv_truncate(s->ctx, 0);  /* each generation starts afresh */
    plm_token *toks = NULL;
    int n = 0;
    plm_sampler *smp = NULL;
    rc = plm_tokenize_alloc_ex(m, prompt, prompt_len, true, false, &toks, &n, err);
    if (!rc) rc = plm_sampler_create(m, sp, &smp, err);
    if (!rc) rc = plm_generate(s->ctx, toks, n, smp, gp, on_piece, r, err);
    plm_sampler_free(smp);
    plm_free(toks);
    return rc;
}

JNIEXPORT jdoubleArray JNICALL Java_org_pocketlm_PocketLM_nativeGenerate(
    JNIEnv *env, jclass cls, jlong h, jlong id, jbyteArray jprompt, jint max_tokens, jfloat temperature, jint top_k,
    jfloat top_p, jfloat min_p, jfloat repeat_penalty, jlong seed, jobjectArray jstops, jobject cb) {
    session *s = (session *)(intptr_t)h;
    if (!cb) {
        throw_error(env, PLM_ERR_INVALID_ARG, "the TokenCallback is null");
        return NULL;
    }
    size_t prompt_len;
    char *prompt = bytes_dup(env, jprompt, &prompt_len);
    int n_stops;
    char **stops = prompt ? copy_stops(env, jstops, &n_stops) : NULL;
    if (!stops) {
        free(prompt);
        if (!(*env)->ExceptionCheck(env)) throw_error(env, PLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    stream st = {s, env, cb, cls, (*env)->GetStaticMethodID(env, cls, "deliver", "(Lorg/pocketlm/TokenCallback;[B)Z")};
    plm_sampler_params sp = plm_sampler_default_params();
    sp.temperature = temperature;
    sp.top_k = top_k;
    sp.top_p = top_p;
    sp.min_p = min_p;
    sp.repeat_penalty = repeat_penalty;
    sp.seed = (uint64_t)seed;
    plm_generate_params gp = plm_generate_default_params();
    gp.max_tokens = max_tokens;
    gp.stops = (const char *const *)stops;
    gp.n_stops = n_stops;
    gp.abort = stream_cancelled;
    gp.user = &st;

    plm_generate_result r = {0};
    plm_error err = {0};
    pthread_mutex_lock(&s->busy);
    atomic_store(&s->running, (long long)id);
    plm_status rc;
    if (cancelled(s)) {
        r.finish = PLM_FINISH_ABORT;
        rc = PLM_OK;
    } else {
        rc = run_generation(s, prompt, prompt_len, &sp, &gp, &r, &err);
    }
    atomic_store(&s->running, 0);
    apply_pending_trim(s);
    pthread_mutex_unlock(&s->busy);
    free_stops(stops, n_stops);
    free(prompt);

    if ((*env)->ExceptionCheck(env)) return NULL; /* the callback threw: rethrown in Java */
    if (rc == PLM_ERR_ABORTED) {          /* cancelled inside the prompt's forward pass */
        r.finish = PLM_FINISH_ABORT;
        rc = PLM_OK;
    }
    if (rc) {
        throw_plm(env, &err);
        return NULL;
    }
    jdoubleArray out = (*env)->NewDoubleArray(env, 5);
    if (!out) return NULL;
    const jdouble v[5] = {r.n_prompt, r.n_generated, r.t_prompt_s, r.t_gen_s, (double)r.finish};
    (*env)->SetDoubleArrayRegion(env, out, 0, 5, v);
    return out;
}

JNIEXPORT void JNICALL Java_org_pocketlm_PocketLM_nativeCancel(JNIEnv *env, jclass cls, jlong h, jlong id,
                                                               jboolean up_to) {
    (void)env, (void)cls;
    session *s = (session *)(intptr_t)h;
    if (up_to) {
        long long cur = atomic_load(&s->cancel_upto);
        while (cur < id && !atomic_compare_exchange_weak(&s->cancel_upto, &cur, (long long)id)) {
        }
    } else {
        atomic_store(&s->cancel_one, (long long)id);
    }
}

JNIEXPORT jlong JNICALL Java_org_pocketlm_PocketLM_nativeTrim(JNIEnv *env, jclass cls, jlong h, jint level) {
    (void)cls;
    session *s = (session *)(intptr_t)h;
    if (level < PLM_TRIM_SCRATCH || level > PLM_TRIM_WEIGHTS) {
        throw_error(env, PLM_ERR_INVALID_ARG, "trim level must be 0 (scratch), 1 (KV) or 2 (weights)");
        return 0;
    }
    if (pthread_mutex_trylock(&s->busy) != 0) {  /* a generation runs: it trims when it ends */
        int cur = atomic_load(&s->pending_trim);
        while (cur < level && !atomic_compare_exchange_weak(&s->pending_trim, &cur, level)) {
        }
        return 0;
    }
    uint64_t n = s->ctx ? plm_context_trim(s->ctx, (plm_trim_level)level) : 0;
    pthread_mutex_unlock(&s->busy);
    return (jlong)n;
}

JNIEXPORT jstring JNICALL Java_org_pocketlm_PocketLM_nativePlan(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    session *s = (session *)(intptr_t)h;
    for (char *p = s->plan; *p; p++) /* NewStringUTF wants modified UTF-8: keep it ASCII */
        if ((unsigned char)*p >= 0x80) *p = '?';
    return (*env)->NewStringUTF(env, s->plan);
}

JNIEXPORT jlongArray JNICALL Java_org_pocketlm_PocketLM_nativeMemory(JNIEnv *env, jclass cls) {
    (void)cls;
    plm_mem_sample m;
    plm_mem_sample_now(&m);
    jlongArray out = (*env)->NewLongArray(env, 2);
    if (!out) return NULL;
    const jlong v[2] = {(jlong)m.rss_bytes, (jlong)m.peak_rss_bytes};
    (*env)->SetLongArrayRegion(env, out, 0, 2, v);
    return out;
}

JNIEXPORT void JNICALL Java_org_pocketlm_PocketLM_nativeClose(JNIEnv *env, jclass cls, jlong h) {
    (void)env, (void)cls;
    session *s = (session *)(intptr_t)h;
    pthread_mutex_lock(&s->busy);  /* the Java side joined every generation; be sure */
    plm_context_free(s->ctx);
    pthread_mutex_unlock(&s->busy);
    pthread_mutex_destroy(&s->busy);
    model_release(s->sm);
    free(s);
}

JNIEXPORT jstring JNICALL Java_org_pocketlm_PocketLM_nativeVersion(JNIEnv *env, jclass cls) {
    (void)cls;
    return (*env)->NewStringUTF(env, plm_version());
}

JNIEXPORT jint JNICALL Java_org_pocketlm_PocketLM_sharedModels(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    pthread_mutex_lock(&registry_lock);
    int n = 0;
    for (shared_model *sm = registry; sm; sm = sm->next) n++;
    pthread_mutex_unlock(&registry_lock);
    return n;
}
