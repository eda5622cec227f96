/* SPDX-License-Identifier: Apache-2.0 */
/*
 * webhook.c - Standard Webhooks signatures: HMAC-SHA-256 over
 * "<id>.<timestamp>.<body>", base64, compared in constant time. The
 * contract is in include/webhook/webhook.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "webhook/webhook.h"

#define SECRET_PREFIX "whsec_"
#define MAC_LEN       32u
#define B64_MAC_LEN   44u /* base64 of 32 bytes, padding included */

static const char *const verdict_names[] = {
    "valid", "missing-header", "bad-timestamp", "stale-timestamp", "bad-signature", "bad-id",
};

const char *whk_verdict_name(whk_verdict_t v)
{
    return (unsigned)v < SVC_COUNTOF(verdict_names) ? verdict_names[v] : "unknown";
}

static bool is_b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

svc_err_t whk_key_parse(const char *secret, whk_key_t *key, char errbuf[static SVC_ERRBUF_LEN])
{
    unsigned char buf[WHK_KEY_MAX + 3];
    size_t len, pad = 0;
    int n;

    if (secret == NULL) {
        svc_errbuf_set(errbuf, "webhook secret: not set");
        return SVC_EINVAL;
    }
    if (strncmp(secret, SECRET_PREFIX, strlen(SECRET_PREFIX)) == 0)
        secret += strlen(SECRET_PREFIX);
    len = strlen(secret);
    /* EVP_DecodeBlock takes no length check of its own and does not say
     * how much padding it decoded, so both are checked here. */
    while (pad < len && pad < 2 && secret[len - 1 - pad] == '=')
        pad++;
    if (len == 0 || len % 4 != 0 || len / 4 * 3 > sizeof buf) {
        svc_errbuf_set(errbuf, "webhook secret: base64 of 1..%d bytes expected (whsec_...)",
                       WHK_KEY_MAX);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < len - pad; i++) {
        if (!is_b64_char(secret[i])) {
            svc_errbuf_set(errbuf, "webhook secret: not base64 at character %zu", i);
            return SVC_EINVAL;
        }
    }
    n = EVP_DecodeBlock(buf, (const unsigned char *)secret, (int)len);
    if (n < 0 || (size_t)n < pad || (size_t)n - pad == 0 || (size_t)n - pad > WHK_KEY_MAX) {
        svc_errbuf_set(errbuf, "webhook secret: base64 of 1..%d bytes expected", WHK_KEY_MAX);
        return SVC_EINVAL;
    }
    key->len = (size_t)n - pad;
    memcpy(key->bytes, buf, key->len);
    OPENSSL_cleanse(buf, sizeof buf);
    return SVC_OK;
}

/* HMAC-SHA-256 of "<id>.<timestamp>.<body>", fed in pieces so that the body
 * is never copied. */
static svc_err_t mac(const whk_key_t *key, const char *id, const char *ts, const void *body,
                     size_t body_len, unsigned char out[MAC_LEN])
{
    EVP_MAC *m = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = m != NULL ? EVP_MAC_CTX_new(m) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string("digest", (char *)(uintptr_t) "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    size_t out_len = 0;
    svc_err_t err = SVC_EINTERNAL;

    if (ctx != NULL && EVP_MAC_init(ctx, key->bytes, key->len, params) == 1 &&
        EVP_MAC_update(ctx, (const unsigned char *)id, strlen(id)) == 1 &&
        EVP_MAC_update(ctx, (const unsigned char *)".", 1) == 1 &&
        EVP_MAC_update(ctx, (const unsigned char *)ts, strlen(ts)) == 1 &&
        EVP_MAC_update(ctx, (const unsigned char *)".", 1) == 1 &&
        (body_len == 0 || EVP_MAC_update(ctx, body, body_len) == 1) &&
        EVP_MAC_final(ctx, out, &out_len, MAC_LEN) == 1 && out_len == MAC_LEN)
        err = SVC_OK;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(m);
    return err;
}

static bool id_ok(const char *id)
{
    return id != NULL && strlen(id) <= WHK_ID_MAX && svc_idempotency_key_valid(id, strlen(id)) &&
           strchr(id, '.') == NULL;
}

/* The base64 signature (no "v1,") of id and the timestamp text. */
static svc_err_t sign_b64(const whk_key_t *key, const char *id, const char *ts, const void *body,
                          size_t body_len, char out[B64_MAC_LEN + 1])
{
    unsigned char digest[MAC_LEN];
    svc_err_t err = mac(key, id, ts, body, body_len, digest);

    if (err == SVC_OK)
        EVP_EncodeBlock((unsigned char *)out, digest, MAC_LEN);
    return err;
}

svc_err_t whk_sign(const whk_key_t *key, const char *id, int64_t timestamp, const void *body,
                   size_t body_len, char out[WHK_SIGNATURE_LEN])
{
    char ts[24], b64[B64_MAC_LEN + 1];
    svc_err_t err;

    if (!id_ok(id))
        return SVC_EINVAL;
    snprintf(ts, sizeof ts, "%" PRId64, timestamp);
    err = sign_b64(key, id, ts, body, body_len, b64);
    if (err == SVC_OK)
        snprintf(out, WHK_SIGNATURE_LEN, "v1,%s", b64);
    return err;
}

svc_err_t whk_headers_make(const whk_key_t *key, const char *id, int64_t timestamp,
                           const void *body, size_t body_len, whk_headers_t *out)
{
    char sig[WHK_SIGNATURE_LEN];
    svc_err_t err = whk_sign(key, id, timestamp, body, body_len, sig);

    if (err != SVC_OK)
        return err;
    snprintf(out->id, sizeof out->id, "webhook-id: %s", id);
    snprintf(out->timestamp, sizeof out->timestamp, "webhook-timestamp: %" PRId64, timestamp);
    snprintf(out->signature, sizeof out->signature, "webhook-signature: %s", sig);
    return SVC_OK;
}

/* A decimal Unix time of at most 18 digits (no sign, no spaces). */
static bool parse_ts(const char *s, int64_t *out)
{
    size_t n = strlen(s);
    int64_t v = 0;

    if (n == 0 || n > 18)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* Does any "v1,<b64>" entry of the space-separated list equal want? Every
 * entry of the right length is compared in full, in constant time, so the
 * time taken says nothing about how much of a forged signature matched. */
static bool any_v1_matches(const char *list, const char want[B64_MAC_LEN + 1])
{
    bool match = false;

    while (*list != '\0') {
        const char *end = strchr(list, ' ');
        size_t len = end != NULL ? (size_t)(end - list) : strlen(list);

        if (len == 3 + B64_MAC_LEN && memcmp(list, "v1,", 3) == 0 &&
            CRYPTO_memcmp(list + 3, want, B64_MAC_LEN) == 0)
            match = true;
        list += len;
        while (*list == ' ')
            list++;
    }
    return match;
}

whk_verdict_t whk_verify(const whk_key_t *key, const char *id, const char *timestamp,
                         const char *signature, const void *body, size_t body_len, int64_t now_s,
                         int64_t tolerance_s)
{
    char want[B64_MAC_LEN + 1];
    int64_t ts;

    if (id == NULL || timestamp == NULL || signature == NULL)
        return WHK_MISSING_HEADER;
    if (!parse_ts(timestamp, &ts))
        return WHK_BAD_TIMESTAMP;
    if (ts < now_s - tolerance_s || ts > now_s + tolerance_s)
        return WHK_STALE_TIMESTAMP;
    if (!id_ok(id))
        return WHK_BAD_ID;
    if (sign_b64(key, id, timestamp, body, body_len, want) != SVC_OK)
        return WHK_BAD_SIGNATURE;
    return any_v1_matches(signature, want) ? WHK_VALID : WHK_BAD_SIGNATURE;
}
