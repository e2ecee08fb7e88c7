/* K-NRM's Gaussian kernel sums over match rows in one pass (Xiong et al. 2017 eq. 3): the compiled CPU path of
 * curricula.models.kernel_pooling (CompiledRowKernelSum). Plain C99, no library beyond libc; built at first use by
 * curricula.models.compiled with -O3 -march=native -ffp-contract=off (no fast-math: the same bits on every x86-64
 * that runs it, whatever its vector width).
 *
 * Layout: rows (N, Lq) float32, one row per document token; pair (N,) int64, the row's pair; soft and grad
 * (K, B, Lq) float32, kernel-major. Kernel 0 is the exact-match kernel (its own exponential); kernels 1..K-1 have
 * centres evenly spaced downwards and one width, computed by the ladder of kernel_ladder (kernel_pooling.py): the
 * middle soft kernel by one exponential, its neighbours by ratios (one exponential and one reciprocal). */
#include <stdint.h>
#include <string.h>

#define BLOCK 128
#define LOG2E 1.4426950408889634f
#define EXP2_FLOOR -125.5f /* EXP_FLOOR (-87) times log2(e): the smallest exponent whose power is a normal float */

/* 2^x for x <= 0, floored at EXP2_FLOOR: x = n + f with n the nearest integer (a magic-number rounding),
 * 2^f by its Taylor polynomial of degree 6 on [-0.5, 0.5] (relative error below 2e-7), 2^n by the exponent bits. */
static inline float exp2_floored(float x) {
    x = x < EXP2_FLOOR ? EXP2_FLOOR : x;
    float r = x + 12582912.0f; /* 1.5 * 2^23: r's low mantissa bits hold round(x) */
    int32_t bits;
    memcpy(&bits, &r, sizeof bits);
    float n = r - 12582912.0f;
    float f = x - n;
    float p = 1.5403530393381606e-4f;
    p = p * f + 1.3333558146428443e-3f;
    p = p * f + 9.6181291076284772e-3f;
    p = p * f + 5.5504108664821580e-2f;
    p = p * f + 2.4022650695910071e-1f;
    p = p * f + 6.9314718055994531e-1f;
    p = p * f + 1.0f;
    int32_t scale_bits = (bits - 0x4B400000 + 127) << 23;
    float scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    return p * scale;
}

typedef struct {
    int64_t count, anchor;
    float mu0, c0, mua, ca, cd, od, shrink;
} Ladder;

static Ladder ladder_of(const float *mus, const float *sigmas, int64_t count) {
    Ladder l;
    float var = sigmas[1] * sigmas[1];
    float delta = (mus[1] - mus[count - 1]) / (float)(count - 2);
    l.count = count;
    l.anchor = 1 + (count - 2) / 2;
    l.mu0 = mus[0];
    l.c0 = -LOG2E / (2.0f * sigmas[0] * sigmas[0]);
    l.mua = mus[l.anchor];
    l.ca = -LOG2E / (2.0f * var);
    l.cd = -delta * LOG2E / var;
    l.od = delta * delta * LOG2E / (2.0f * var);
    l.shrink = exp2_floored(-delta * delta * LOG2E / var);
    return l;
}

/* the K kernel values of m similarities s into v (K rows of BLOCK) */
static void kernel_values(const Ladder *l, const float *s, int64_t m, float v[][BLOCK]) {
    float down[BLOCK], up[BLOCK];
    int64_t a = l->anchor, count = l->count;
    for (int64_t i = 0; i < m; i++) {
        float x = s[i] - l->mu0, y = s[i] - l->mua;
        v[0][i] = exp2_floored(x * x * l->c0);
        v[a][i] = exp2_floored(y * y * l->ca);
        down[i] = exp2_floored(y * l->cd - l->od);
        up[i] = l->shrink / down[i];
    }
    for (int64_t j = a + 1; j < count; j++) {
        for (int64_t i = 0; i < m; i++) v[j][i] = v[j - 1][i] * down[i];
        if (j + 1 < count)
            for (int64_t i = 0; i < m; i++) down[i] *= l->shrink;
    }
    for (int64_t j = a - 1; j > 0; j--) {
        for (int64_t i = 0; i < m; i++) v[j][i] = v[j + 1][i] * up[i];
        if (j > 1)
            for (int64_t i = 0; i < m; i++) up[i] *= l->shrink;
    }
}

/* soft[k][pair[n]][i] += value_k(rows[n][i]) over the rows n (soft zeroed by the caller); count <= 64 */
void row_kernel_sum_forward(const float *rows, const int64_t *pair, int64_t n, int64_t lq, int64_t batch,
                            const float *mus, const float *sigmas, int64_t count, float *soft) {
    Ladder l = ladder_of(mus, sigmas, count);
    float v[64][BLOCK];
    for (int64_t r = 0; r < n; r++) {
        for (int64_t i0 = 0; i0 < lq; i0 += BLOCK) {
            int64_t m = lq - i0 < BLOCK ? lq - i0 : BLOCK;
            kernel_values(&l, rows + r * lq + i0, m, v);
            for (int64_t k = 0; k < count; k++) {
                float *out = soft + (k * batch + pair[r]) * lq + i0;
                for (int64_t i = 0; i < m; i++) out[i] += v[k][i];
            }
        }
    }
}

/* grad_rows[n][i] = sum_k grad[k][pair[n]][i] * value_k(s) * (mu_k - s) / sigma_k^2, s = rows[n][i]: the soft
 * kernels as (R1 - s R0) / sigma^2 with R0 = sum g_k v_k and R1 = sum g_k v_k mu_k, the exact-match kernel apart */
void row_kernel_sum_backward(const float *rows, const int64_t *pair, int64_t n, int64_t lq, int64_t batch,
                             const float *mus, const float *sigmas, int64_t count, const float *grad,
                             float *grad_rows) {
    Ladder l = ladder_of(mus, sigmas, count);
    float inv = 1.0f / (sigmas[1] * sigmas[1]), inv0 = 1.0f / (sigmas[0] * sigmas[0]);
    float v[64][BLOCK], r0[BLOCK], r1[BLOCK];
    for (int64_t r = 0; r < n; r++) {
        for (int64_t i0 = 0; i0 < lq; i0 += BLOCK) {
            int64_t m = lq - i0 < BLOCK ? lq - i0 : BLOCK;
            const float *s = rows + r * lq + i0;
            kernel_values(&l, s, m, v);
            for (int64_t i = 0; i < m; i++) r0[i] = r1[i] = 0.0f;
            for (int64_t k = 1; k < count; k++) {
                const float *g = grad + (k * batch + pair[r]) * lq + i0;
                float mu = mus[k];
                for (int64_t i = 0; i < m; i++) {
                    float gv = g[i] * v[k][i];
                    r0[i] += gv;
                    r1[i] += gv * mu;
                }
            }
            const float *g0 = grad + pair[r] * lq + i0;
            float *out = grad_rows + r * lq + i0;
            for (int64_t i = 0; i < m; i++)
                out[i] = (r1[i] - s[i] * r0[i]) * inv + g0[i] * v[0][i] * ((l.mu0 - s[i]) * inv0);
        }
    }
}

/* ln(x) for normal x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), ln m by Cephes' logf polynomial in f = m - 1
 * (relative error about 1e-7), e ln 2 added in two parts */
static inline float log_normal(float x) {
    int32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t e = ((bits >> 23) & 0xff) - 126;
    int32_t mbits = (bits & 0x007fffff) | 0x3f000000; /* m in [0.5, 1) */
    float m;
    memcpy(&m, &mbits, sizeof m);
    int32_t low = m < 0.70710678118654752f; /* then m in [0.5, sqrt(1/2)): 2m - 1 (m + m is exact), e - 1 */
    float f = (m + m * (float)low) - 1.0f;
    float fe = (float)(e - low);
    float z = f * f;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    return (f + y) + 0.693359375f * fe;
}

#define LOG_FLOOR 1e-10f /* K-NRM's floor of a soft-TF before its log (the authors' implementation) */
#define LOG_SCALE 0.01f  /* and the scale of each log */

/* max(x, LOG_FLOOR) by the bits (the order of float bit patterns, as signed integers, is that of the floats for
 * x >= 0, and every negative x is floored): a float select keeps gcc from vectorising the loop */
static inline float floored(float x) {
    int32_t xb, fb;
    float floor = LOG_FLOOR;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&fb, &floor, sizeof fb);
    xb = xb > fb ? xb : fb;
    memcpy(&x, &xb, sizeof x);
    return x;
}

/* K-NRM eq. 4 for every (pair, query side, document side, kernel): out[b][s][t][k] = sum over the positions i of
 * query side s (segment s of widths) of 0.01 * ln(max(soft[k][t * batch + b][i], 1e-10)) * q_mask[b][i], from the
 * soft-TF (K, sides * batch, Lq) of row_kernel_sum_forward; the sum over i in 16 partial sums (lane (i - start)
 * % 16, added in a fixed tree: an order that does not depend on the vector width) */
void pooled_logs_forward(const float *soft, const float *q_mask, int64_t count, int64_t sides, int64_t batch,
                         int64_t lq, const int64_t *widths, int64_t segments, float *out) {
    float v[4096];
    for (int64_t k = 0; k < count; k++)
        for (int64_t t = 0; t < sides; t++)
            for (int64_t b = 0; b < batch; b++) {
                const float *x = soft + (k * sides * batch + t * batch + b) * lq, *m = q_mask + b * lq;
                for (int64_t i = 0; i < lq; i++) {
                    v[i] = log_normal(floored(x[i])) * LOG_SCALE * m[i];
                }
                int64_t start = 0;
                for (int64_t s = 0; s < segments; s++) {
                    float acc[16] = {0};
                    int64_t i = 0, width = widths[s];
                    for (; i + 16 <= width; i += 16)
                        for (int64_t l = 0; l < 16; l++) acc[l] += v[start + i + l];
                    for (; i < width; i++) acc[i % 16] += v[start + i];
                    for (int64_t half = 8; half > 0; half /= 2)
                        for (int64_t l = 0; l < half; l++) acc[l] += acc[l + half];
                    out[((b * segments + s) * sides + t) * count + k] = acc[0];
                    start += width;
                }
            }
}

/* the gradient of pooled_logs_forward: grad_soft[k][t * batch + b][i] = grad[b][s(i)][t][k] * 0.01 * q_mask[b][i]
 * / soft where soft >= 1e-10, else 0 */
void pooled_logs_backward(const float *soft, const float *q_mask, int64_t count, int64_t sides, int64_t batch,
                          int64_t lq, const int64_t *widths, int64_t segments, const float *grad, float *grad_soft) {
    for (int64_t k = 0; k < count; k++)
        for (int64_t t = 0; t < sides; t++)
            for (int64_t b = 0; b < batch; b++) {
                int64_t row = (k * sides * batch + t * batch + b) * lq;
                const float *x = soft + row, *m = q_mask + b * lq;
                float *g = grad_soft + row;
                int64_t start = 0;
                for (int64_t s = 0; s < segments; s++) {
                    float up = grad[((b * segments + s) * sides + t) * count + k] * LOG_SCALE;
                    for (int64_t i = start; i < start + widths[s]; i++) {
                        float xi = x[i], q = up * m[i] / xi; /* selected away below the floor (x may be 0) */
                        g[i] = xi >= LOG_FLOOR ? q : 0.0f;
                    }
                    start += widths[s];
                }
            }
}
