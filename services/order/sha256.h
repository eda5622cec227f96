/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sha256.h - SHA-256 (FIPS 180-4), small and dependency-free, for request
 * fingerprints of idempotency keys. Not constant-time; not for secrets.
 */
#ifndef ORD_SHA256_H
#define ORD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define ORD_SHA256_LEN 32

/* Caller-allocated; the fields are private. */
typedef struct ord_sha256 {
    uint32_t h[8];
    uint64_t bytes;        /* message length so far */
    unsigned char buf[64]; /* partial block */
    size_t used;
} ord_sha256_t;

void ord_sha256_init(ord_sha256_t *s);
/* p borrowed; n may be 0. */
void ord_sha256_update(ord_sha256_t *s, const void *p, size_t n);
/* Writes the digest; s must be initialised again before reuse. */
void ord_sha256_final(ord_sha256_t *s, unsigned char out[ORD_SHA256_LEN]);

#endif
