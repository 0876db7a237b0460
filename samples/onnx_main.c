/* onnx_main.c - calls the classifier that nestc compiled from ONNX (samples/onnx_export.py)
 * through its generated header, and prints how far it is from torch's output.
 *
 *   cc -Idir samples/onnx_main.c dir/classifier.so -o main && ./main dir
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "classifier.h"

/* The float32 data of a 2-D .npy file written by numpy.save (version 1, little-endian). */
static int load_npy(const char *path, float *out, size_t count)
{
    FILE *in = fopen(path, "rb");
    unsigned char head[10];
    if (!in || fread(head, 1, 10, in) != 10 || memcmp(head, "\x93NUMPY", 6) != 0) {
        if (in)
            fclose(in);
        return -1;
    }
    size_t hlen = head[8] | (size_t)head[9] << 8;
    int ok = fseek(in, (long)hlen, SEEK_CUR) == 0 && fread(out, sizeof *out, count, in) == count;
    fclose(in);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    char path[4096];
    static float x[4 * 64], want[4 * 10], probs[4 * 10];
    snprintf(path, sizeof path, "%s/x.npy", dir);
    if (load_npy(path, x, 4 * 64) != 0)
        return fprintf(stderr, "cannot read %s\n", path), 1;
    snprintf(path, sizeof path, "%s/torch.npy", dir);
    if (load_npy(path, want, 4 * 10) != 0)
        return fprintf(stderr, "cannot read %s\n", path), 1;
    if (classifier(x, probs) != 0)
        return fprintf(stderr, "classifier failed\n"), 1;
    double worst = 0;
    for (int i = 0; i < 40; i++) {
        double d = fabs(probs[i] - want[i]) / fmax(fabs(want[i]), 1e-6);
        worst = d > worst ? d : worst;
    }
    printf("C: classifier(x) row 0 = [%.4f, %.4f, %.4f, ...]\n", probs[0], probs[1], probs[2]);
    printf("C: largest relative difference from torch: %.2g\n", worst);
    return worst < 1e-4 ? 0 : 1;
}
