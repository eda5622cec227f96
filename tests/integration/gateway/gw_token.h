/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gw_token.h - the gateway tests' token issuer: one ES256 key per test
 * process, the JWKS file the test gateways verify with, and bearer tokens
 * signed with that key (or, to be refused, with another one).
 *
 * The key and the file are made on first use, in a directory of their own
 * under $TMPDIR that goes away at exit. Thread-safe after the first call,
 * which the fixture makes before any thread starts.
 */
#ifndef GW_TOKEN_H
#define GW_TOKEN_H

#include <stdbool.h>
#include <stdint.h>

#include "svc/core.h"

#define GW_TOKEN_ISSUER   "shopmicro-it"
#define GW_TOKEN_AUDIENCE "shopmicro-gateway"
/* The scopes of gw_it's default token: everything a test may call. */
#define GW_TOKEN_ALL_SCOPES "catalog:write orders:write orders:read"

/* "GATEWAY_JWKS_FILE=…", "GATEWAY_JWT_ISSUER=…", "GATEWAY_JWT_AUDIENCE=…":
 * entry i (0..2) of the gateway's environment for these tokens. */
const char *gw_token_env(int i);
/* The JWKS file's path. */
const char *gw_token_jwks_path(void);

/* The keys of the issuer. */
typedef enum gw_token_key {
    GW_TOKEN_KEY_MAIN,   /* in the JWKS file from the start */
    GW_TOKEN_KEY_FORGED, /* never published; its tokens carry MAIN's kid: a forgery */
    GW_TOKEN_KEY_NEXT,   /* its own kid; published by gw_token_publish_next_key */
} gw_token_key_t;

/* What a token says; zero fields take the defaults noted. */
typedef struct gw_token_opts {
    const char *sub;      /* required */
    const char *scope;    /* NULL: no scope claim */
    int64_t ttl_s;        /* 0: 3600 */
    int64_t iat_offset_s; /* iat = now + this (negative: in the past) */
    bool has_nbf;
    int64_t nbf_offset_s; /* nbf = iat + this */
    const char *aud;      /* NULL: GW_TOKEN_AUDIENCE */
    const char *iss;      /* NULL: GW_TOKEN_ISSUER */
    gw_token_key_t key;   /* which key signs it */
} gw_token_opts_t;

/* A signed token; *out owned by caller (free). Fails the test on error. */
char *gw_token_make(const gw_token_opts_t *o);
/* gw_token_make with sub and scope, the rest the defaults. */
char *gw_token(const char *sub, const char *scope);
/* Rewrites the JWKS file (a new file renamed over it, as a deployment
 * rotates) with MAIN and NEXT. */
void gw_token_publish_next_key(void);

#endif
