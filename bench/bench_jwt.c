/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_jwt.c - what the gateway's token check costs per request, on one thread:
 *
 *   cold    gw_jwt_verify: base64url, header, signature (OpenSSL), claims;
 *           what a token costs the first time a loop sees it;
 *   cached  gw_auth_verify on a loop whose cache holds the token: SHA-256 of
 *           the token, a lookup, exp checked; what a client reusing its
 *           token pays on every later request.
 *
 * for an ES256 (P-256) and an RS256 (2048-bit) token of the size the local
 * stack signs, side by side. Time is the thread's CPU time (CLOCK_THREAD_
 * CPUTIME_ID), so a busy neighbour on the machine does not count; the wall
 * time is printed too. Each figure is the median of 5 rounds.
 *
 * usage: bench_jwt [--seconds S]   (S: the time each round aims at, default 0.2)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>

#include "auth.h"
#include "bench_pct.h"
#include "bench_util.h"
#include "jwt_sign.h"

#define PROG   "bench_jwt"
#define ROUNDS 5

static double seconds = 0.2;

static uint64_t cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef gw_jwt_err_t (*op_fn)(void *ctx);

typedef struct cold_ctx {
    gw_jwks_t *set;
    gw_jwt_opts_t o;
    const char *tok;
} cold_ctx_t;

static gw_jwt_err_t cold_op(void *p)
{
    cold_ctx_t *c = p;
    gw_principal_t out;

    return gw_jwt_verify(c->set, &c->o, c->tok, strlen(c->tok), &out);
}

typedef struct cached_ctx {
    gw_auth_loop_t *l;
    const char *tok;
} cached_ctx_t;

static gw_jwt_err_t cached_op(void *p)
{
    cached_ctx_t *c = p;
    gw_principal_t out;

    return gw_auth_verify(c->l, c->tok, strlen(c->tok), &out);
}

/* Median ns per call of op over ROUNDS rounds, in CPU (and wall) time. */
static void measure(op_fn op, void *ctx, double *cpu_med, double *wall_med)
{
    double cpu[ROUNDS], wall[ROUNDS];
    uint64_t n = 1, t0, w0;

    /* Size a round: double n until one takes a tenth of the target. */
    for (;;) {
        t0 = cpu_ns();
        for (uint64_t i = 0; i < n; i++)
            if (op(ctx) != GW_JWT_OK)
                bench_die(PROG, "the token did not verify");
        if ((double)(cpu_ns() - t0) > seconds * 1e8)
            break;
        n *= 2;
    }
    n = n * 10;
    for (int r = 0; r < ROUNDS; r++) {
        t0 = cpu_ns();
        w0 = bench_now_ns();
        for (uint64_t i = 0; i < n; i++)
            (void)op(ctx);
        cpu[r] = (double)(cpu_ns() - t0) / (double)n;
        wall[r] = (double)(bench_now_ns() - w0) / (double)n;
    }
    qsort(cpu, ROUNDS, sizeof(double), bench_cmp_double);
    qsort(wall, ROUNDS, sizeof(double), bench_cmp_double);
    *cpu_med = cpu[ROUNDS / 2];
    *wall_med = wall[ROUNDS / 2];
}

static char *write_jwks(const char *dir, const char *name, EVP_PKEY *key, gw_jws_alg_t alg)
{
    char errbuf[SVC_ERRBUF_LEN] = "", *jwk = NULL, *path = malloc(256);
    FILE *f;

    snprintf(path, 256, "%s/%s", dir, name);
    if (gw_jwk_public_json(key, "k", alg, &jwk, errbuf) != SVC_OK)
        bench_die(PROG, "jwk: %s", errbuf);
    f = fopen(path, "w");
    if (f == NULL || fprintf(f, "{\"keys\":[%s]}", jwk) < 0 || fclose(f) != 0)
        bench_die(PROG, "cannot write %s", path);
    free(jwk);
    return path;
}

static void run(const char *dir, const char *label, EVP_PKEY *key, gw_jws_alg_t alg)
{
    char errbuf[SVC_ERRBUF_LEN] = "", *tok = NULL, *path = write_jwks(dir, label, key, alg);
    gw_jwt_claims_t c = {.iss = "shopmicro-local",
                         .aud = "shopmicro-gateway",
                         .sub = "c1",
                         .scope = "orders:write orders:read",
                         .iat = (int64_t)time(NULL),
                         .ttl_s = 3600};
    gw_auth_opts_t ao;
    gw_auth_t *a = NULL;
    gw_auth_loop_t *l = NULL;
    cold_ctx_t cold;
    cached_ctx_t cached;
    double cc, cw, hc, hw;

    if (gw_jwt_sign(key, alg, "k", &c, &tok, errbuf) != SVC_OK)
        bench_die(PROG, "sign: %s", errbuf);
    gw_auth_opts_init(&ao);
    ao.jwks_file = path;
    ao.issuer = c.iss;
    ao.audience = c.aud;
    if (gw_auth_new(&ao, &a, errbuf) != SVC_OK || gw_auth_loop_new(a, &l) != SVC_OK)
        bench_die(PROG, "auth: %s", errbuf);
    cold.set = NULL;
    if (gw_jwks_load_file(path, &cold.set, errbuf) != SVC_OK)
        bench_die(PROG, "jwks: %s", errbuf);
    gw_jwt_opts_init(&cold.o);
    cold.o.issuer = c.iss;
    cold.o.audience = c.aud;
    cold.tok = tok;
    cached.l = l;
    cached.tok = tok;

    measure(cold_op, &cold, &cc, &cw);
    measure(cached_op, &cached, &hc, &hw);
    printf("%-6s %5zu %12.0f %12.0f %12.0f %12.0f %8.0fx\n", label, strlen(tok), cc, hc, cw, hw,
           cc / hc);
    gw_jwks_release(cold.set);
    gw_auth_loop_free(l);
    gw_auth_free(a);
    unlink(path);
    free(path);
    free(tok);
}

int main(int argc, char **argv)
{
    char dir[] = "/tmp/bench_jwt.XXXXXX";
    EVP_PKEY *ec, *rsa;

    if (argc == 3 && strcmp(argv[1], "--seconds") == 0) {
        seconds = strtod(argv[2], NULL);
        if (!(seconds > 0 && seconds <= 60))
            bench_die(PROG, "--seconds %s: 0..60", argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--seconds S]\n", PROG);
        return 2;
    }
    if (mkdtemp(dir) == NULL)
        bench_die(PROG, "mkdtemp failed");
    ec = EVP_EC_gen("prime256v1");
    rsa = EVP_RSA_gen(2048);
    if (ec == NULL || rsa == NULL)
        bench_die(PROG, "key generation failed");
    printf("ns per token check, median of %d rounds; thread CPU time, wall time beside it; %s\n",
           ROUNDS, OpenSSL_version(OPENSSL_VERSION));
    printf("%-6s %5s %12s %12s %12s %12s %9s\n", "alg", "bytes", "cold cpu", "cached cpu",
           "cold wall", "cached wall", "cold/hit");
    run(dir, "ES256", ec, GW_JWS_ES256);
    run(dir, "RS256", rsa, GW_JWS_RS256);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(rsa);
    rmdir(dir);
    return 0;
}
