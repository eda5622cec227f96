/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_jwt.c - fuzz target for the gateway's token parsing (gateway/jwt.c, jwks.c, b64url.c).
 *
 * The first input byte picks what the rest is (its value modulo 3; the seeds use '0' '1' '2'):
 *   0  a bearer token, verified against a fixed set (an EC and an RSA key): the fuzzer rarely
 *      gets past the signature, so this covers the splitting, base64url and header paths;
 *   1  "header\npayload" JSON texts, signed here with the EC key and then verified, so that the
 *      claims code (iss, aud, exp, nbf, sub, scope, scp) sees arbitrary input under a valid
 *      signature;
 *   2  a JWKS text, parsed.
 * Nothing may crash, leak or read out of bounds, and mode 1 may only accept a token whose sub
 * keeps the documented charset and length (abort() otherwise).
 *
 * Built two ways (tests/fuzz/CMakeLists.txt): fuzz_jwt_driver with any compiler, a deterministic
 * driver (JWT_FUZZ_STANDALONE: built-in seeds, then fixed-seed mutations) that ctest runs as
 * fuzz_jwt_bounded; and, with clang and SHOPMICRO_FUZZ_JWT=ON, fuzz_jwt, a libFuzzer binary.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ec.h>
#include <openssl/rsa.h>

#include "jwks.h"
#include "jwt.h"
#include "jwt_sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gw_jwks_t *set;
static EVP_PKEY *ec;
static gw_jwt_opts_t opts;

static void init_once(void)
{
    char errbuf[SVC_ERRBUF_LEN] = "", *a = NULL, *b = NULL, json[4096];
    EVP_PKEY *rsa;

    if (set != NULL)
        return;
    ec = EVP_EC_gen("prime256v1");
    rsa = EVP_RSA_gen(2048);
    if (ec == NULL || rsa == NULL ||
        gw_jwk_public_json(ec, "e", GW_JWS_ES256, &a, errbuf) != SVC_OK ||
        gw_jwk_public_json(rsa, "r", GW_JWS_RS256, &b, errbuf) != SVC_OK)
        abort();
    snprintf(json, sizeof(json), "{\"keys\":[%s,%s]}", a, b);
    if (gw_jwks_parse(json, strlen(json), &set, errbuf) != SVC_OK)
        abort();
    free(a);
    free(b);
    EVP_PKEY_free(rsa);
    gw_jwt_opts_init(&opts);
    opts.issuer = "i";
    opts.audience = "a";
}

static void check_principal(const gw_principal_t *p)
{
    size_t n = strlen(p->sub);

    if (n == 0 || n > GW_JWT_SUB_MAX ||
        strspn(p->sub, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       "0123456789-._~:@|+") != n)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char errbuf[SVC_ERRBUF_LEN], *text, *nl, *tok = NULL;
    gw_principal_t p;
    gw_jwks_t *s = NULL;

    init_once();
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        if (gw_jwt_verify(set, &opts, (const char *)data + 1, size - 1, &p) == GW_JWT_OK)
            check_principal(&p);
        break;
    case 1:
        text = malloc(size);
        if (text == NULL)
            abort();
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        nl = strchr(text, '\n');
        if (nl != NULL) {
            *nl = '\0';
            if (gw_jwt_sign_raw(ec, GW_JWS_ES256, text, nl + 1, &tok, errbuf) == SVC_OK &&
                gw_jwt_verify(set, &opts, tok, strlen(tok), &p) == GW_JWT_OK)
                check_principal(&p);
            free(tok);
        }
        free(text);
        break;
    default:
        if (gw_jwks_parse((const char *)data + 1, size - 1, &s, errbuf) == SVC_OK)
            gw_jwks_release(s);
        break;
    }
    return 0;
}

#ifdef JWT_FUZZ_STANDALONE
/* ------------------------------------------------------------------------
 * Standalone driver: the seeds below, then `runs` inputs made by mutating
 * them with a fixed-seed PRNG, so every run is the same.
 *   fuzz_jwt_driver [-runs=N] [-seed=S]
 * ------------------------------------------------------------------------ */
static const char *const seeds[] = {
    "1{\"alg\":\"ES256\",\"kid\":\"e\",\"typ\":\"JWT\"}\n{\"iss\":\"i\",\"aud\":[\"x\",\"a\"],"
    "\"sub\":\"c1\",\"exp\":99999999999,\"nbf\":1,\"iat\":1,\"scope\":\"orders:read "
    "catalog:write\"}",
    "1{\"alg\":\"ES256\",\"kid\":\"e\"}\n{\"iss\":\"i\",\"aud\":\"a\",\"sub\":\"c1\",\"exp\":1e11,"
    "\"scp\":[\"orders:write\",\"orders:admin\"]}",
    "1{\"alg\":\"ES256\"}\n{\"iss\":\"i\",\"aud\":\"a\",\"sub\":\"auth0|x.y\",\"exp\":99999999999}",
    "0eyJhbGciOiJFUzI1NiIsImtpZCI6ImUifQ.eyJzdWIiOiJjMSJ9.AAAA",
    "0eyJhbGciOiJub25lIn0.eyJzdWIiOiJjMSJ9.",
    "0eyJhbGciOiJSUzI1NiIsImtpZCI6InIifQ.e30.AAAAAAAAAAAAAAAAAAAAAAAA",
    "2{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"a\",\"x\":\"AAAA\",\"y\":\"AAAA\"},"
    "{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\",\"use\":\"sig\",\"alg\":\"RS256\"}]}",
};
static const char pieces[][8] = {".",  "\"", "{",  "}",    "[",       "]",      ",",
                                 ":",  "=",  "-",  "_",    "\\u00",   "null",   "1e999",
                                 "-1", "\n", "AA", "\xff", "\"alg\"", "\"kid\""};

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

int main(int argc, char **argv)
{
    long runs = 20000;
    uint8_t buf[4096];

    rng_state = 1;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-runs=", 6) == 0)
            runs = strtol(argv[i] + 6, NULL, 10);
        else if (strncmp(argv[i], "-seed=", 6) == 0)
            rng_state = strtoull(argv[i] + 6, NULL, 10) | 1;
    }
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        LLVMFuzzerTestOneInput((const uint8_t *)seeds[i], strlen(seeds[i]));
    for (long r = 0; r < runs; r++) {
        const char *s = seeds[rnd() % (sizeof(seeds) / sizeof(seeds[0]))];
        size_t len = strlen(s);
        int edits = 1 + (int)(rnd() % 4);

        memcpy(buf, s, len);
        while (edits-- > 0 && len > 1) {
            size_t at = 1 + (size_t)(rnd() % (len - 1));
            const char *pc = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t pl = strlen(pc);
            switch (rnd() % 4) {
            case 0: /* flip a byte */
                buf[at] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 1: /* cut */
                len = at;
                break;
            case 2: /* insert a piece */
                if (len + pl < sizeof(buf)) {
                    memmove(buf + at + pl, buf + at, len - at);
                    memcpy(buf + at, pc, pl);
                    len += pl;
                }
                break;
            default: /* delete a byte */
                memmove(buf + at, buf + at + 1, len - at - 1);
                len--;
                break;
            }
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("fuzz_jwt_driver: %zu seeds and %ld mutated inputs, no crash\n",
           sizeof(seeds) / sizeof(seeds[0]), runs);
    gw_jwks_release(set);
    EVP_PKEY_free(ec);
    return 0;
}
#endif /* JWT_FUZZ_STANDALONE */
