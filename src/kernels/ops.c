#include "kernels/ops.h"

#include <math.h>

#include "quant/fp16.h"

void plm_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double sum = 0.0;  /* ggml accumulates the squares in double */
    for (int i = 0; i < n; i++) sum += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(sum / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void plm_rope_angles(float *cos_out, float *sin_out, int n_rot, float pos, float freq_base,
                     float freq_scale) {
    /* Same recurrence as ggml: theta is multiplied by a constant step, which
     * rounds differently from computing each power afresh. */
    const float step = powf(freq_base, -2.0f / (float)n_rot);
    float theta = pos * freq_scale;
    for (int i = 0; i < n_rot / 2; i++) {
        cos_out[i] = cosf(theta);
        sin_out[i] = sinf(theta);
        theta *= step;
    }
}

void plm_rope_apply(float *x, int n_heads, int head_dim, int n_rot, const float *cos_t,
                    const float *sin_t, int neox) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * cos_t[i] - x1 * sin_t[i];
            v[b] = x0 * sin_t[i] + x1 * cos_t[i];
        }
    }
}

void plm_softmax(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void plm_swiglu(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

float plm_dot_f16(const uint16_t *a, const uint16_t *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += plm_fp16_to_fp32(a[i]) * plm_fp16_to_fp32(b[i]);
    return sum;
}

void plm_axpy_f16(float *y, float a, const uint16_t *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * plm_fp16_to_fp32(x[i]);
}

void plm_attn_scores_f16(float *scores, const uint16_t *q, const void *k, size_t k_stride, int n_keys, int hd,
                         float scale) {
    for (int j = 0; j < n_keys; j++)
        scores[j] = plm_dot_f16(q, (const uint16_t *)(const void *)((const char *)k + (size_t)j * k_stride), hd) * scale;
}

void plm_attn_values_f16(float *o, const float *w, const void *v, size_t v_stride, int n_keys, int hd) {
    for (int i = 0; i < hd; i++) o[i] = 0.0f;
    for (int j = 0; j < n_keys; j++)
        plm_axpy_f16(o, plm_fp16_to_fp32(plm_fp32_to_fp16(w[j])),
                     (const uint16_t *)(const void *)((const char *)v + (size_t)j * v_stride), hd);
}
