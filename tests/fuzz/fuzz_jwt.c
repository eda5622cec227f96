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
 * Built two ways (tests/fuzz/CMakeLists.txt): fuzz_jwt_driver with any compiler and driver.c
 * (corpus/jwt/, then fixed-seed mutations), which ctest runs as fuzz_jwt_bounded; and, with clang
 * and SHOPMICRO_FUZZ_JWT=ON, fuzz_jwt, a libFuzzer binary.
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

#include "driver.h"

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

/* What driver.c splices into its mutations. */
const char *const fuzz_tokens[] = {
    ".", "\"",    "{",    "}",     "[",  "]",  ",",  ":",    "=",       "-",
    "_", "\\u00", "null", "1e999", "-1", "\n", "AA", "\xff", "\"alg\"", "\"kid\"",
};
const size_t fuzz_n_tokens = sizeof fuzz_tokens / sizeof fuzz_tokens[0];
