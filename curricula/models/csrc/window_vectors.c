/* ConvKNRM's n-gram vectors at token windows in one pass per window (Dai et al. 2018 §3.1: the convolution, its
 * ReLU and the L2 normalisation of the cosine matches): the compiled CPU path of curricula.models.packed
 * (window_vectors), built with kernel_pooling.c by curricula.models.compiled (-O3 -march=native -ffp-contract=off,
 * no fast-math: the same bits on every x86-64 that runs it, whatever its vector width).
 *
 * Layout: table (rows, C) float32, the convolution taps of the batch's distinct tokens, a zero row and the biases
 * (packed.tap_table); index (columns, n) int64, the table rows whose sum is window w's convolution, column by column
 * (packed.token_windows; the zero row pads the smaller n-grams and is skipped here: adding zeros changes no sum);
 * out (n, C) the unit vectors; norms (n,) each window's norm before the floor eps. */
#include <math.h>
#include <stdint.h>

#define LANES 16

/* sum of a[j] * b[j] over j < c in LANES partial sums (lane j % LANES, j ascending), added in a fixed tree: an order
 * that does not depend on how many lanes the compiler puts in one vector register */
static inline float dot(const float *a, const float *b, int64_t c) {
    float acc[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= c; j += LANES)
        for (int64_t l = 0; l < LANES; l++) acc[l] += a[j + l] * b[j + l];
    for (; j < c; j++) acc[j % LANES] += a[j] * b[j];
    for (int64_t half = LANES / 2; half > 0; half /= 2)
        for (int64_t l = 0; l < half; l++) acc[l] += acc[l + half];
    return acc[0];
}

/* out[w] = relu(v) / max(||relu(v)||, eps) with v = sum over the columns of table[index[k][w]] (k ascending) */
void window_vectors_forward(const float *table, const int64_t *index, int64_t columns, int64_t n, int64_t c,
                            int64_t zero_row, float eps, float *out, float *norms) {
    for (int64_t w = 0; w < n; w++) {
        float *v = out + w * c;
        const float *first = table + index[w] * c;
        for (int64_t j = 0; j < c; j++) v[j] = first[j];
        for (int64_t k = 1; k < columns; k++) {
            int64_t row = index[k * n + w];
            if (row == zero_row) continue;
            const float *t = table + row * c;
            for (int64_t j = 0; j < c; j++) v[j] += t[j];
        }
        for (int64_t j = 0; j < c; j++) v[j] = v[j] > 0.0f ? v[j] : 0.0f;
        float norm = sqrtf(dot(v, v, c));
        norms[w] = norm;
        float d = norm > eps ? norm : eps;
        for (int64_t j = 0; j < c; j++) v[j] = v[j] / d;
    }
}

/* grad_table[index[k][w]] += the gradient of window w's convolution (windows ascending, then columns): with
 * u = out[w] and d = max(norm, eps), d u / d v = (I - u u^T) / d where the norm is at least eps (else I / d), times
 * the ReLU's derivative (1 where u > 0). grad_table is zeroed by the caller. */
void window_vectors_backward(const int64_t *index, int64_t columns, int64_t n, int64_t c, int64_t zero_row,
                             float eps, const float *out, const float *norms, const float *grad,
                             float *grad_table) {
    float gv[4096];
    for (int64_t w = 0; w < n; w++) {
        const float *u = out + w * c, *g = grad + w * c;
        float norm = norms[w];
        float d = norm > eps ? norm : eps;
        float along = norm >= eps ? dot(g, u, c) : 0.0f;
        for (int64_t j = 0; j < c; j++) gv[j] = u[j] > 0.0f ? (g[j] - u[j] * along) / d : 0.0f;
        for (int64_t k = 0; k < columns; k++) {
            int64_t row = index[k * n + w];
            if (row == zero_row) continue;
            float *t = grad_table + row * c;
            for (int64_t j = 0; j < c; j++) t[j] += gv[j];
        }
    }
}
