/* SPDX-License-Identifier: Apache-2.0 */
/*
 * webhook/webhook.h - signing and verifying webhooks the Standard Webhooks way
 * (https://www.standardwebhooks.com), in one place for every sender (the
 * notification service) and receiver (services/notify-sink).
 *
 * A delivery carries three headers:
 *
 *   webhook-id:        the message id (ours: the event id; also Idempotency-Key)
 *   webhook-timestamp: Unix seconds when it was signed
 *   webhook-signature: v1,<base64 of HMAC-SHA-256(key, "<id>.<timestamp>.<body>")>
 *
 * The key is the secret's bytes: a secret is written "whsec_<base64>" (the
 * prefix optional), as the spec's libraries read it, of 24..64 random bytes
 * (the spec's minimum; 64 is HMAC-SHA-256's block).
 *
 * Rotation (the spec's "zero downtime secret rotation"): a sender holds a key
 * set and signs with every key, so webhook-signature carries one v1 entry per
 * key, space-separated; a receiver holds its own set and accepts a delivery
 * when any entry verifies with any of its keys. docs/notifications.md has
 * the steps. Signing over the id and
 * the timestamp as well as the body means a captured delivery can neither be
 * replayed later (the receiver refuses a timestamp outside its tolerance) nor
 * pass for another message.
 *
 * Pure functions on caller-owned memory: thread-safe, no allocation that
 * outlives a call. HMAC and base64 come from OpenSSL's libcrypto, and the
 * signature comparison is constant-time (CRYPTO_memcmp).
 */
#ifndef WEBHOOK_WEBHOOK_H
#define WEBHOOK_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

#define WHK_DEFAULT_TOLERANCE_S 300 /* the spec's libraries use 5 minutes */
#define WHK_KEY_MIN             24  /* bytes of a decoded secret: the spec's minimum (192 bits) */
#define WHK_KEY_MAX             64  /* bytes of a decoded secret (HMAC-SHA-256 block size) */
#define WHK_KEYS_MAX            4   /* keys of a set: the current one and those being rotated out */
#define WHK_SECRET_FILE_MAX     4096 /* bytes of a secret file */
#define WHK_ID_MAX              255  /* a webhook-id, the Idempotency-Key rule of svc/core.h */
/* "v1," + base64 of 32 bytes (44 characters) + NUL */
#define WHK_SIGNATURE_LEN 48

typedef struct whk_key {
    unsigned char bytes[WHK_KEY_MAX];
    size_t len;
} whk_key_t;

/* The keys a sender signs with (all) and a receiver verifies with (any). */
typedef struct whk_keyset {
    whk_key_t keys[WHK_KEYS_MAX];
    size_t n; /* 1..WHK_KEYS_MAX once parsed */
} whk_keyset_t;

/*
 * Reads a secret "whsec_<base64>" (or bare base64) into *key. SVC_EINVAL
 * (errbuf says why) when it is not base64, decodes to fewer than
 * WHK_KEY_MIN or more than WHK_KEY_MAX bytes, or is a key that is public:
 * the development secret this repository once defaulted to, or a
 * placeholder it ships (deploy/k8s/secrets). secret borrowed.
 */
svc_err_t whk_key_parse(const char *secret, whk_key_t *key, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Reads a list of 1..WHK_KEYS_MAX secrets separated by spaces, commas or
 * line breaks into *ks, each as whk_key_parse reads it; the same key twice
 * is an error (a rotation that forgot to change it). SVC_EINVAL with the
 * reason, naming the entry by its position (never its value). list
 * borrowed.
 */
svc_err_t whk_keyset_parse(const char *list, whk_keyset_t *ks, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * A program's key set from its configuration: exactly one of value (the
 * list itself) and file (a path to a file holding the list, at most
 * WHK_SECRET_FILE_MAX bytes) is set (non-empty). var is the variable's
 * name for the messages ("NOTIFY_WEBHOOK_SECRET"; the file's is var +
 * "_FILE"). SVC_EINVAL when neither or both are set or the list is bad,
 * SVC_EUNAVAIL when the file cannot be read; errbuf names the variable and
 * says what to do. Everything borrowed.
 */
svc_err_t whk_keyset_load(const char *var, const char *value, const char *file, whk_keyset_t *ks,
                          char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Writes "v1,<base64 signature>" of id, timestamp and body into out.
 * id: 1..WHK_ID_MAX characters 0x21-0x7E (svc_idempotency_key_valid(): it
 * is also the Idempotency-Key) and no '.', signed verbatim. The spec forbids
 * the '.' because it separates the signed parts: with one in the id, "a.b"
 * + "1" and "a" + "b.1" would sign the same text. SVC_EINVAL for a bad id,
 * SVC_EINTERNAL if libcrypto fails. Everything borrowed.
 */
svc_err_t whk_sign(const whk_key_t *key, const char *id, int64_t timestamp, const void *body,
                   size_t body_len, char out[WHK_SIGNATURE_LEN]);

/* The three header lines of a signed delivery, ready for curl_slist_append;
 * signature holds one "v1,..." entry per key, space-separated. */
typedef struct whk_headers {
    char id[sizeof "webhook-id: " + WHK_ID_MAX];
    char timestamp[sizeof "webhook-timestamp: " + 20];
    char signature[sizeof "webhook-signature: " + WHK_KEYS_MAX * WHK_SIGNATURE_LEN];
} whk_headers_t;

/* whk_sign, then the three "name: value" lines into *out. */
svc_err_t whk_headers_make(const whk_key_t *key, const char *id, int64_t timestamp,
                           const void *body, size_t body_len, whk_headers_t *out);
/* The same, signed with every key of ks (in its order). */
svc_err_t whk_headers_make_all(const whk_keyset_t *ks, const char *id, int64_t timestamp,
                               const void *body, size_t body_len, whk_headers_t *out);

/* A receiver's verdict on one delivery. APPEND ONLY (names are in logs). */
typedef enum whk_verdict {
    WHK_VALID,           /* "valid" */
    WHK_MISSING_HEADER,  /* "missing-header": id, timestamp or signature absent */
    WHK_BAD_TIMESTAMP,   /* "bad-timestamp": not a decimal Unix time */
    WHK_STALE_TIMESTAMP, /* "stale-timestamp": outside the tolerance, either way */
    WHK_BAD_SIGNATURE,   /* "bad-signature": no v1 signature matches */
    WHK_BAD_ID,          /* "bad-id": not 1..WHK_ID_MAX characters 0x21-0x7E without '.' */
} whk_verdict_t;

/* "valid", "missing-header", ... Never NULL. */
const char *whk_verdict_name(whk_verdict_t v);

/*
 * Verifies a delivery. id, timestamp and signature are the header values
 * (NULL when absent); signature may list several space-separated
 * "v<n>,<base64>" entries (key rotation): one matching v1 entry is enough,
 * other versions are skipped. now_s is the receiver's Unix time and
 * tolerance_s how far the timestamp may be from it (WHK_DEFAULT_TOLERANCE_S).
 * The timestamp is checked before the HMAC is computed; an id with a '.'
 * (or otherwise not one whk_sign takes) is WHK_BAD_ID. Thread-safe.
 */
whk_verdict_t whk_verify(const whk_key_t *key, const char *id, const char *timestamp,
                         const char *signature, const void *body, size_t body_len, int64_t now_s,
                         int64_t tolerance_s);
/* whk_verify with a key set: WHK_VALID when any v1 entry matches any key. */
whk_verdict_t whk_verify_any(const whk_keyset_t *ks, const char *id, const char *timestamp,
                             const char *signature, const void *body, size_t body_len,
                             int64_t now_s, int64_t tolerance_s);

#endif /* WEBHOOK_WEBHOOK_H */
