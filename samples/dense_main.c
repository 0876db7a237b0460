/*
 * dense_main.c - call a layer compiled ahead of time: `nestc samples/dense.nest -o dense.so`
 * writes dense.so and dense.h; this program links the .so through the header alone.
 *
 *   cc -I. samples/dense_main.c ./dense.so -lm -o dense_main && ./dense_main
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dense.h"

#define B 64
#define I 256
#define O 128

int main(void)
{
    static float x[B * I], w[I * O], b[O], out[B * O];
    for (int i = 0; i < B * I; i++)
        x[i] = (float)((i * 7) % 13 - 6) / 8;
    for (int i = 0; i < I * O; i++)
        w[i] = (float)((i * 5) % 11 - 5) / 16;
    for (int j = 0; j < O; j++)
        b[j] = (float)(j % 3 - 1);
    if (dense(x, w, b, out) != 0) {
        fprintf(stderr, "dense failed\n");
        return 1;
    }
    /* check against a plain triple loop */
    double maxerr = 0, sum = 0;
    for (int r = 0; r < B; r++)
        for (int c = 0; c < O; c++) {
            double z = b[c];
            for (int k = 0; k < I; k++)
                z += (double)x[r * I + k] * w[k * O + c];
            double want = z > 0 ? z : 0, err = fabs(want - out[r * O + c]);
            if (err > maxerr)
                maxerr = err;
            sum += out[r * O + c];
        }
    printf("dense: relu(x . w + b) for %dx%d . %dx%d, sum of outputs %.4f, max error %.2g\n", B, I,
           I, O, sum, maxerr);
    return maxerr < 1e-3 ? 0 : 1;
}
