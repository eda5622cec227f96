/* SPDX-License-Identifier: Apache-2.0 */
/* gw_token.c - the gateway tests' token issuer (contract in gw_token.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "gw_token.h"
#include "jwt_sign.h"

static struct {
    EVP_PKEY *key[3]; /* gw_token_key_t */
    char kid[3][GW_JWK_THUMBPRINT_LEN];
    char dir[256], path[320];
    char env[3][400];
} iss;

static void cleanup(void)
{
    unlink(iss.path);
    rmdir(iss.dir);
    for (int i = 0; i < 3; i++)
        EVP_PKEY_free(iss.key[i]);
}

/* The JWKS of MAIN, and of NEXT too when next. */
static void write_jwks(bool next)
{
    char errbuf[SVC_ERRBUF_LEN] = "", tmp[340];
    char *jwk[2] = {NULL, NULL};
    FILE *f;

    for (int i = 0; i < (next ? 2 : 1); i++) {
        gw_token_key_t k = i == 0 ? GW_TOKEN_KEY_MAIN : GW_TOKEN_KEY_NEXT;
        if (gw_jwk_public_json(iss.key[k], iss.kid[k], GW_JWS_ES256, &jwk[i], errbuf) != SVC_OK)
            fail_msg("gw_token: public JWK: %s", errbuf);
    }
    snprintf(tmp, sizeof tmp, "%s.new", iss.path);
    f = fopen(tmp, "w");
    if (f == NULL ||
        fprintf(f, "{\"keys\":[%s%s%s]}\n", jwk[0], next ? "," : "", next ? jwk[1] : "") < 0 ||
        fclose(f) != 0 || rename(tmp, iss.path) != 0)
        fail_msg("gw_token: cannot write %s", iss.path);
    free(jwk[0]);
    free(jwk[1]);
}

void gw_token_publish_next_key(void)
{
    write_jwks(true);
}

/* The keys and the file, once per process. */
static void ensure(void)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    const char *tmp = getenv("TMPDIR");

    if (iss.key[0] != NULL)
        return;
    for (int i = 0; i < 3; i++) {
        if ((iss.key[i] = EVP_EC_gen("P-256")) == NULL)
            fail_msg("gw_token: EVP_EC_gen failed");
        if (gw_jwk_thumbprint(iss.key[i], iss.kid[i], errbuf) != SVC_OK)
            fail_msg("gw_token: thumbprint: %s", errbuf);
    }
    snprintf(iss.dir, sizeof iss.dir, "%s/gw-token.XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(iss.dir) == NULL)
        fail_msg("gw_token: mkdtemp %s failed", iss.dir);
    snprintf(iss.path, sizeof iss.path, "%s/jwks.json", iss.dir);
    write_jwks(false);
    snprintf(iss.env[0], sizeof iss.env[0], "GATEWAY_JWKS_FILE=%s", iss.path);
    snprintf(iss.env[1], sizeof iss.env[1], "GATEWAY_JWT_ISSUER=%s", GW_TOKEN_ISSUER);
    snprintf(iss.env[2], sizeof iss.env[2], "GATEWAY_JWT_AUDIENCE=%s", GW_TOKEN_AUDIENCE);
    atexit(cleanup);
}

const char *gw_token_env(int i)
{
    ensure();
    return i >= 0 && i < 3 ? iss.env[i] : NULL;
}

const char *gw_token_jwks_path(void)
{
    ensure();
    return iss.path;
}

char *gw_token_make(const gw_token_opts_t *o)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_jwt_claims_t c = {
        .iss = o->iss != NULL ? o->iss : GW_TOKEN_ISSUER,
        .aud = o->aud != NULL ? o->aud : GW_TOKEN_AUDIENCE,
        .sub = o->sub,
        .scope = o->scope,
        .iat = (int64_t)time(NULL) + o->iat_offset_s,
        .ttl_s = o->ttl_s != 0 ? o->ttl_s : 3600,
        .has_nbf = o->has_nbf,
        .nbf_offset_s = o->nbf_offset_s,
    };
    char *tok = NULL;

    ensure();
    /* A forgery carries MAIN's kid: the key the gateway will try. */
    const char *kid = iss.kid[o->key == GW_TOKEN_KEY_NEXT ? GW_TOKEN_KEY_NEXT : GW_TOKEN_KEY_MAIN];
    if (gw_jwt_sign(iss.key[o->key], GW_JWS_ES256, kid, &c, &tok, errbuf) != SVC_OK)
        fail_msg("gw_token: sign: %s", errbuf);
    return tok;
}

char *gw_token(const char *sub, const char *scope)
{
    gw_token_opts_t o = {.sub = sub, .scope = scope};

    return gw_token_make(&o);
}
