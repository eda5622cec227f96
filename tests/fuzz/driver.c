/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.c - the standalone fuzz driver (contract in driver.h): replays the
 * corpus, then `runs` inputs made by mutating corpus entries with a
 * fixed-seed PRNG, so every run is the same.
 *   fuzz_<name>_driver [-runs=N] [-seed=S] corpus_dir_or_file...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"

typedef struct {
    uint8_t *data;
    size_t len;
} input_t;

static input_t *corpus;
static size_t n_corpus;
static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: small, fast and deterministic. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static size_t below(size_t n)
{
    return n == 0 ? 0 : (size_t)(rnd() % n);
}

static void add_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    input_t in = {NULL, 0};
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto out;
    in.data = malloc((size_t)n + 1);
    if (in.data == NULL || fread(in.data, 1, (size_t)n, f) != (size_t)n) {
        free(in.data);
        goto out;
    }
    in.len = (size_t)n;
    corpus = realloc(corpus, (n_corpus + 1) * sizeof(*corpus));
    if (corpus == NULL)
        abort();
    corpus[n_corpus++] = in;
out:
    if (f != NULL)
        fclose(f);
}

static void add_path(const char *path)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    char full[4096];

    if (dir == NULL) {
        add_file(path);
        return;
    }
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
        add_file(full);
    }
    closedir(dir);
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    size_t pos = below(len + 1), n;
    const char *tok;

    switch (below(6)) {
    case 0: /* flip a bit */
        if (len > 0)
            buf[below(len)] ^= (uint8_t)(1u << below(8));
        return len;
    case 1: /* replace a byte */
        if (len > 0)
            buf[below(len)] = (uint8_t)rnd();
        return len;
    case 2: /* delete a range */
        n = below(len - pos + 1);
        memmove(buf + pos, buf + pos + n, len - pos - n);
        return len - n;
    case 3: /* insert a token */
        tok = fuzz_tokens[below(fuzz_n_tokens)];
        n = strlen(tok);
        if (len + n > cap)
            return len;
        memmove(buf + pos + n, buf + pos, len - pos);
        memcpy(buf + pos, tok, n);
        return len + n;
    case 4: /* duplicate a range */
        n = below(len - pos + 1);
        if (len + n > cap)
            return len;
        memmove(buf + pos + n, buf + pos, len - pos);
        return len + n;
    default: { /* splice in part of another entry */
        const input_t *o = &corpus[below(n_corpus)];
        size_t from = below(o->len + 1);
        n = below(o->len - from + 1);
        if (len + n > cap)
            return len;
        memmove(buf + pos + n, buf + pos, len - pos);
        memcpy(buf + pos, o->data + from, n);
        return len + n;
    }
    }
}

int main(int argc, char **argv)
{
    enum { CAP = 1 << 16 };
    unsigned long long runs = 10000, seed = 1;
    uint8_t *buf = malloc(CAP);
    clock_t t0 = clock();

    if (buf == NULL)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-runs=", 6) == 0)
            runs = strtoull(argv[i] + 6, NULL, 10);
        else if (strncmp(argv[i], "-seed=", 6) == 0)
            seed = strtoull(argv[i] + 6, NULL, 10);
        else
            add_path(argv[i]);
    }
    if (n_corpus == 0) {
        fprintf(stderr, "usage: %s [-runs=N] [-seed=S] corpus...\n", argv[0]);
        return 1;
    }
    for (size_t i = 0; i < n_corpus; i++)
        LLVMFuzzerTestOneInput(corpus[i].data, corpus[i].len);
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (unsigned long long r = 0; r < runs; r++) {
        const input_t *in = &corpus[below(n_corpus)];
        size_t len = in->len < CAP ? in->len : CAP;
        memcpy(buf, in->data, len);
        for (size_t k = 1 + below(4); k > 0; k--)
            len = mutate(buf, len, CAP);
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("%s: %zu corpus inputs + %llu mutated inputs (seed %llu): ok in %.1fs\n", argv[0],
           n_corpus, runs, seed, (double)(clock() - t0) / CLOCKS_PER_SEC);
    for (size_t i = 0; i < n_corpus; i++)
        free(corpus[i].data);
    free(corpus);
    free(buf);
    return 0;
}
