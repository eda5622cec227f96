/* SPDX-License-Identifier: Apache-2.0 */
/*
 * webhook.c - Standard Webhooks signatures: HMAC-SHA-256 over
 * "<id>.<timestamp>.<body>", base64, compared in constant time. The
 * contract is in include/webhook/webhook.h.
 */
#include <errno.h>
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

/* Keys that are public, so never a secret: the development secret the
 * services once defaulted to, and the deploy/k8s placeholder that decoded to
 * a valid key. Compared as decoded bytes, so any spelling of them is caught. */
static const char *const public_keys[] = {
    "shopmicro-local-dev-secret!",
    "CHANGE-ME-not-a-real-signing-key",
};

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
    if ((size_t)n - pad < WHK_KEY_MIN) {
        OPENSSL_cleanse(buf, sizeof buf);
        svc_errbuf_set(errbuf,
                       "webhook secret: %zu bytes, at least %d random bytes needed (the Standard "
                       "Webhooks minimum)",
                       (size_t)n - pad, WHK_KEY_MIN);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < SVC_COUNTOF(public_keys); i++) {
        if (strlen(public_keys[i]) == (size_t)n - pad &&
            memcmp(public_keys[i], buf, (size_t)n - pad) == 0) {
            OPENSSL_cleanse(buf, sizeof buf);
            svc_errbuf_set(errbuf, "webhook secret: a public development or placeholder value "
                                   "from the repository, never a secret: make a random one");
            return SVC_EINVAL;
        }
    }
    key->len = (size_t)n - pad;
    memcpy(key->bytes, buf, key->len);
    OPENSSL_cleanse(buf, sizeof buf);
    return SVC_OK;
}

#define LIST_SEPARATORS " ,\t\r\n"

svc_err_t whk_keyset_parse(const char *list, whk_keyset_t *ks, char errbuf[static SVC_ERRBUF_LEN])
{
    char one[WHK_KEY_MAX * 2 + 16], why[SVC_ERRBUF_LEN];
    svc_err_t err = SVC_OK;

    ks->n = 0;
    for (const char *p = list != NULL ? list : ""; *(p += strspn(p, LIST_SEPARATORS)) != '\0';) {
        size_t len = strcspn(p, LIST_SEPARATORS);

        if (ks->n == WHK_KEYS_MAX) {
            svc_errbuf_set(errbuf, "webhook secrets: at most %d", WHK_KEYS_MAX);
            err = SVC_EINVAL;
            break;
        }
        if (len >= sizeof one) {
            svc_errbuf_set(errbuf, "webhook secret %zu: too long for %d bytes", ks->n + 1,
                           WHK_KEY_MAX);
            err = SVC_EINVAL;
            break;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        p += len;
        err = whk_key_parse(one, &ks->keys[ks->n], why);
        if (err != SVC_OK) {
            /* "webhook secret: ..." becomes "webhook secret 2: ..." */
            svc_errbuf_set(errbuf, "webhook secret %zu%s", ks->n + 1,
                           why + strlen("webhook secret"));
            break;
        }
        for (size_t i = 0; i < ks->n; i++) {
            if (ks->keys[i].len == ks->keys[ks->n].len &&
                CRYPTO_memcmp(ks->keys[i].bytes, ks->keys[ks->n].bytes, ks->keys[i].len) == 0) {
                svc_errbuf_set(errbuf, "webhook secret %zu: the same as secret %zu", ks->n + 1,
                               i + 1);
                err = SVC_EINVAL;
            }
        }
        if (err != SVC_OK)
            break;
        ks->n++;
    }
    OPENSSL_cleanse(one, sizeof one);
    if (err == SVC_OK && ks->n == 0) {
        svc_errbuf_set(errbuf, "webhook secret: not set");
        err = SVC_EINVAL;
    }
    if (err != SVC_OK) {
        OPENSSL_cleanse(ks, sizeof *ks);
        ks->n = 0;
    }
    return err;
}

/* The file's text, NUL-terminated, into buf; false with errno on failure. */
static bool read_small_file(const char *path, char *buf, size_t cap, bool *too_big)
{
    FILE *f = fopen(path, "re");
    size_t n;

    *too_big = false;
    if (f == NULL)
        return false;
    n = fread(buf, 1, cap, f);
    if (ferror(f)) {
        fclose(f);
        errno = EIO;
        return false;
    }
    *too_big = n == cap;
    fclose(f);
    buf[n < cap ? n : cap - 1] = '\0';
    return true;
}

svc_err_t whk_keyset_load(const char *var, const char *value, const char *file, whk_keyset_t *ks,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    static const char make[] = "make one with: echo \"whsec_$(head -c 32 /dev/urandom | base64)\"";
    char text[WHK_SECRET_FILE_MAX + 1], why[SVC_ERRBUF_LEN];
    bool has_value = value != NULL && value[0] != '\0', has_file = file != NULL && file[0] != '\0';
    bool too_big;
    svc_err_t err;

    if (has_value == has_file) {
        svc_errbuf_set(errbuf,
                       has_value ? "%s and %s_FILE are both set: set one of them"
                                 : "%s (or %s_FILE, a file holding it) is required: the Standard "
                                   "Webhooks secret, whsec_ + base64 of 24..64 random bytes; %s",
                       var, var, make);
        return SVC_EINVAL;
    }
    if (has_file) {
        if (!read_small_file(file, text, sizeof text, &too_big)) {
            svc_errbuf_set(errbuf, "%s_FILE=%s: cannot read it: %s", var, file, strerror(errno));
            return SVC_EUNAVAIL;
        }
        if (too_big) {
            OPENSSL_cleanse(text, sizeof text);
            svc_errbuf_set(errbuf, "%s_FILE=%s: larger than %d bytes", var, file,
                           WHK_SECRET_FILE_MAX);
            return SVC_EINVAL;
        }
        value = text;
    }
    err = whk_keyset_parse(value, ks, why);
    if (has_file)
        OPENSSL_cleanse(text, sizeof text);
    if (err != SVC_OK)
        svc_errbuf_set(errbuf, "%s%s%s: %s; %s", var, has_file ? "_FILE=" : "",
                       has_file ? file : "", why, make);
    return err;
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

svc_err_t whk_headers_make_all(const whk_keyset_t *ks, const char *id, int64_t timestamp,
                               const void *body, size_t body_len, whk_headers_t *out)
{
    char sig[WHK_SIGNATURE_LEN];
    size_t used;

    if (ks->n == 0 || ks->n > WHK_KEYS_MAX)
        return SVC_EINVAL;
    used = (size_t)snprintf(out->signature, sizeof out->signature, "webhook-signature:");
    for (size_t i = 0; i < ks->n; i++) {
        svc_err_t err = whk_sign(&ks->keys[i], id, timestamp, body, body_len, sig);

        if (err != SVC_OK)
            return err;
        used += (size_t)snprintf(out->signature + used, sizeof out->signature - used, " %s", sig);
    }
    snprintf(out->id, sizeof out->id, "webhook-id: %s", id);
    snprintf(out->timestamp, sizeof out->timestamp, "webhook-timestamp: %" PRId64, timestamp);
    return SVC_OK;
}

svc_err_t whk_headers_make(const whk_key_t *key, const char *id, int64_t timestamp,
                           const void *body, size_t body_len, whk_headers_t *out)
{
    whk_keyset_t one = {.n = 1};

    one.keys[0] = *key;
    return whk_headers_make_all(&one, id, timestamp, body, body_len, out);
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

whk_verdict_t whk_verify_any(const whk_keyset_t *ks, const char *id, const char *timestamp,
                             const char *signature, const void *body, size_t body_len,
                             int64_t now_s, int64_t tolerance_s)
{
    char want[B64_MAC_LEN + 1];
    bool match = false;
    int64_t ts;

    if (id == NULL || timestamp == NULL || signature == NULL)
        return WHK_MISSING_HEADER;
    if (!parse_ts(timestamp, &ts))
        return WHK_BAD_TIMESTAMP;
    if (ts < now_s - tolerance_s || ts > now_s + tolerance_s)
        return WHK_STALE_TIMESTAMP;
    if (!id_ok(id))
        return WHK_BAD_ID;
    /* Every key is tried, also after a match, so the time taken does not
     * say which key of the set signed. */
    for (size_t i = 0; i < ks->n && i < WHK_KEYS_MAX; i++) {
        if (sign_b64(&ks->keys[i], id, timestamp, body, body_len, want) != SVC_OK)
            return WHK_BAD_SIGNATURE;
        if (any_v1_matches(signature, want))
            match = true;
    }
    return match ? WHK_VALID : WHK_BAD_SIGNATURE;
}

whk_verdict_t whk_verify(const whk_key_t *key, const char *id, const char *timestamp,
                         const char *signature, const void *body, size_t body_len, int64_t now_s,
                         int64_t tolerance_s)
{
    whk_keyset_t one = {.n = 1};

    one.keys[0] = *key;
    return whk_verify_any(&one, id, timestamp, signature, body, body_len, now_s, tolerance_s);
}
