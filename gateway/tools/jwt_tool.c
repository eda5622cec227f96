/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jwt_tool.c - shopmicro-jwt: the local stack's signing key and tokens.
 *
 *   shopmicro-jwt keygen --key FILE --jwks FILE [--alg ES256|RS256]
 *   shopmicro-jwt sign --key FILE [--kid K] --iss I --aud A --sub S [--scope "a b"]
 *                      [--ttl SECONDS] [--nbf-offset SECONDS] [--alg ES256|RS256]
 *   shopmicro-jwt verify --jwks FILE --iss I --aud A [--leeway SECONDS] [--token T]
 *
 * keygen writes a new private key (PEM, mode 0600, never over an existing
 * file) and the public JWKS, whose kid is the key's RFC 7638 thumbprint;
 * sign prints a compact token (kid: the key's thumbprint unless given);
 * verify reads a token (--token, else one line of stdin) and checks it with
 * the gateway's own verifier, printing "sub=... scopes=... exp=..." (exit 0)
 * or the reason (exit 1). It is a development tool: the gateway never signs,
 * and a real deployment's tokens come from its identity provider.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "jwks.h"
#include "jwt.h"
#include "jwt_sign.h"

typedef struct args {
    const char *key, *jwks, *kid, *iss, *aud, *sub, *scope, *token;
    gw_jws_alg_t alg;
    long long ttl, nbf_offset, leeway;
    bool has_nbf;
} args_t;

static void usage(FILE *f)
{
    fputs(
        "usage: shopmicro-jwt keygen --key FILE --jwks FILE [--alg ES256|RS256]\n"
        "       shopmicro-jwt sign --key FILE [--kid K] --iss I --aud A --sub S [--scope \"a b\"]\n"
        "                          [--ttl SECONDS] [--nbf-offset SECONDS] [--alg ES256|RS256]\n"
        "       shopmicro-jwt verify --jwks FILE --iss I --aud A [--leeway SECONDS] [--token T]\n",
        f);
}

static bool parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, args_t *a)
{
    static const struct option opts[] = {
        {"key", required_argument, NULL, 'k'},
        {"jwks", required_argument, NULL, 'j'},
        {"kid", required_argument, NULL, 'i'},
        {"iss", required_argument, NULL, 'I'},
        {"aud", required_argument, NULL, 'A'},
        {"sub", required_argument, NULL, 's'},
        {"scope", required_argument, NULL, 'S'},
        {"ttl", required_argument, NULL, 't'},
        {"nbf-offset", required_argument, NULL, 'n'},
        {"alg", required_argument, NULL, 'a'},
        {"leeway", required_argument, NULL, 'l'},
        {"token", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(a, 0, sizeof(*a));
    a->alg = GW_JWS_ES256;
    a->ttl = 3600;
    a->leeway = GW_JWT_DEFAULT_LEEWAY_S;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k':
            a->key = optarg;
            break;
        case 'j':
            a->jwks = optarg;
            break;
        case 'i':
            a->kid = optarg;
            break;
        case 'I':
            a->iss = optarg;
            break;
        case 'A':
            a->aud = optarg;
            break;
        case 's':
            a->sub = optarg;
            break;
        case 'S':
            a->scope = optarg;
            break;
        case 'T':
            a->token = optarg;
            break;
        case 't':
            if (!parse_ll(optarg, 1, 366LL * 24 * 3600, &a->ttl)) {
                fprintf(stderr, "shopmicro-jwt: --ttl %s: 1..31622400 seconds\n", optarg);
                return -1;
            }
            break;
        case 'n':
            if (!parse_ll(optarg, -31622400, 31622400, &a->nbf_offset)) {
                fprintf(stderr, "shopmicro-jwt: --nbf-offset %s: a number of seconds\n", optarg);
                return -1;
            }
            a->has_nbf = true;
            break;
        case 'l':
            if (!parse_ll(optarg, 0, GW_JWT_MAX_LEEWAY_S, &a->leeway)) {
                fprintf(stderr, "shopmicro-jwt: --leeway %s: 0..%u seconds\n", optarg,
                        GW_JWT_MAX_LEEWAY_S);
                return -1;
            }
            break;
        case 'a':
            if (!gw_jws_alg_parse(optarg, strlen(optarg), &a->alg) ||
                (a->alg != GW_JWS_ES256 && a->alg != GW_JWS_RS256)) {
                fprintf(stderr, "shopmicro-jwt: --alg %s: ES256 or RS256\n", optarg);
                return -1;
            }
            break;
        default:
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

static bool need(const char *v, const char *name)
{
    if (v == NULL || v[0] == '\0')
        fprintf(stderr, "shopmicro-jwt: %s is required\n", name);
    return v != NULL && v[0] != '\0';
}

static int keygen(const args_t *a)
{
    EVP_PKEY *key = NULL;
    FILE *f = NULL;
    char kid[GW_JWK_THUMBPRINT_LEN], errbuf[SVC_ERRBUF_LEN] = "", *jwk = NULL;
    int fd = -1, rc = 1;

    if (!need(a->key, "--key") || !need(a->jwks, "--jwks"))
        return 2;
    key = a->alg == GW_JWS_RS256 ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
    if (key == NULL || gw_jwk_thumbprint(key, kid, errbuf) != SVC_OK ||
        gw_jwk_public_json(key, kid, a->alg, &jwk, errbuf) != SVC_OK) {
        fprintf(stderr, "shopmicro-jwt: keygen: %s\n", errbuf[0] ? errbuf : "OpenSSL failed");
        goto out;
    }
    /* O_EXCL: a key already in use is never replaced by accident. */
    fd = open(a->key, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
        fprintf(stderr, "shopmicro-jwt: %s: %s\n", a->key, strerror(errno));
        goto out;
    }
    fd = -1;
    if (PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) != 1 || fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "shopmicro-jwt: cannot write %s\n", a->key);
        goto out;
    }
    f = fopen(a->jwks, "w");
    if (f == NULL || fprintf(f, "{\"keys\":[%s]}\n", jwk) < 0 || fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "shopmicro-jwt: cannot write %s\n", a->jwks);
        goto out;
    }
    f = NULL;
    printf("kid=%s\n", kid);
    rc = 0;
out:
    if (f != NULL)
        fclose(f);
    if (fd >= 0)
        close(fd);
    free(jwk);
    EVP_PKEY_free(key);
    return rc;
}

static int sign(const args_t *a)
{
    EVP_PKEY *key = NULL;
    FILE *f;
    char kid[GW_JWK_THUMBPRINT_LEN], errbuf[SVC_ERRBUF_LEN] = "", *tok = NULL;
    gw_jwt_claims_t c = {0};
    int rc = 1;

    if (!need(a->key, "--key") || !need(a->iss, "--iss") || !need(a->aud, "--aud") ||
        !need(a->sub, "--sub"))
        return 2;
    f = fopen(a->key, "r");
    if (f == NULL) {
        fprintf(stderr, "shopmicro-jwt: %s: %s\n", a->key, strerror(errno));
        return 1;
    }
    key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (key == NULL) {
        fprintf(stderr, "shopmicro-jwt: %s: not a PEM private key\n", a->key);
        return 1;
    }
    if (a->kid == NULL && gw_jwk_thumbprint(key, kid, errbuf) != SVC_OK)
        goto fail;
    c.iss = a->iss;
    c.aud = a->aud;
    c.sub = a->sub;
    c.scope = a->scope;
    c.iat = (int64_t)time(NULL);
    c.ttl_s = a->ttl;
    c.has_nbf = a->has_nbf;
    c.nbf_offset_s = a->nbf_offset;
    if (gw_jwt_sign(key, a->alg, a->kid != NULL ? a->kid : kid, &c, &tok, errbuf) != SVC_OK)
        goto fail;
    printf("%s\n", tok);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "shopmicro-jwt: sign: %s\n", errbuf);
out:
    free(tok);
    EVP_PKEY_free(key);
    return rc;
}

static int verify(const args_t *a)
{
    char errbuf[SVC_ERRBUF_LEN] = "", line[GW_JWT_MAX_TOKEN + 2], scopes[128];
    gw_jwks_t *set = NULL;
    gw_jwt_opts_t o;
    gw_principal_t p;
    gw_jwt_err_t err;
    const char *tok = a->token;
    size_t len;

    if (!need(a->jwks, "--jwks") || !need(a->iss, "--iss") || !need(a->aud, "--aud"))
        return 2;
    if (tok == NULL) {
        if (fgets(line, sizeof(line), stdin) == NULL) {
            fprintf(stderr, "shopmicro-jwt: verify: no token on stdin\n");
            return 1;
        }
        line[strcspn(line, "\r\n")] = '\0';
        tok = line;
    }
    if (gw_jwks_load_file(a->jwks, &set, errbuf) != SVC_OK) {
        fprintf(stderr, "shopmicro-jwt: %s\n", errbuf);
        return 1;
    }
    gw_jwt_opts_init(&o);
    o.issuer = a->iss;
    o.audience = a->aud;
    o.leeway_s = (uint32_t)a->leeway;
    len = strlen(tok);
    err = gw_jwt_verify(set, &o, tok, len, &p);
    gw_jwks_release(set);
    if (err != GW_JWT_OK) {
        fprintf(stderr, "shopmicro-jwt: invalid token: %s\n", gw_jwt_reason(err));
        return 1;
    }
    pr_scopes_format(p.scopes, scopes, sizeof(scopes));
    printf("sub=%s scopes=\"%s\" exp=%lld\n", p.sub, scopes, (long long)p.exp);
    return 0;
}

int main(int argc, char **argv)
{
    args_t a;
    const char *cmd = argc > 1 ? argv[1] : "";

    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (parse_args(argc - 1, argv + 1, &a) != 0)
        return 2;
    if (optind + 1 != argc) {
        fprintf(stderr, "shopmicro-jwt: unexpected argument %s\n",
                optind + 1 < argc ? argv[optind + 1] : "(none)");
        return 2;
    }
    if (strcmp(cmd, "keygen") == 0)
        return keygen(&a);
    if (strcmp(cmd, "sign") == 0)
        return sign(&a);
    if (strcmp(cmd, "verify") == 0)
        return verify(&a);
    usage(stderr);
    return 2;
}
