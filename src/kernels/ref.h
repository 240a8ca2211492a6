/*
 * The scalar reference vec_dot functions of kernels_ref.c, exposed so that
 * SIMD tables (x86, arm) can point their entries without a SIMD version at
 * them.  Add declarations only; each has the plm_vec_dot_fn signature.
 */
#ifndef PLM_KERNELS_REF_H
#define PLM_KERNELS_REF_H

#include <stdint.h>

void plm_ref_vec_dot_f32(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_f16(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_bf16(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q4_0(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q4_1(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q5_0(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q5_1(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q8_0(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q2_K(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q3_K(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q4_K(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q5_K(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_q6_K(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_iq4_nl(int64_t n, float *s, const void *w, const void *a);
void plm_ref_vec_dot_iq4_xs(int64_t n, float *s, const void *w, const void *a);

#endif
