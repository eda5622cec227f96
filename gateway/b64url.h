/* SPDX-License-Identifier: Apache-2.0 */
/*
 * b64url.h - base64url without padding (RFC 7515 §2, RFC 4648 §5), the
 * encoding of every JWS part and of the JWK members n, e, x, y.
 *
 * Strict on input: only A-Z a-z 0-9 - _, no '=' and no white space, a length
 * that is not 1 modulo 4, and zero bits after the last full byte (so that
 * one byte string has exactly one encoding: a token whose signature part was
 * changed in its unused bits is not "the same" token to the cache).
 */
#ifndef GW_B64URL_H
#define GW_B64URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes that decoding len characters yields at most. */
#define GW_B64URL_DECODED_MAX(len) (((len) / 4) * 3 + 2)
/* Characters that encoding n bytes yields, without a NUL. */
#define GW_B64URL_ENCODED_LEN(n) (((n) / 3) * 4 + ((n) % 3 == 0 ? 0 : (n) % 3 + 1))

/* Decodes in (len characters, need not be NUL-terminated) into out (cap
 * bytes); *out_len the decoded length. False when the input breaks a rule
 * above or the result does not fit in cap. Thread-safe. */
bool gw_b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap, size_t *out_len);

/* Encodes n bytes into out (cap bytes), NUL-terminated; returns the length
 * without the NUL, or 0 when it does not fit (cap <= the encoded length). */
size_t gw_b64url_encode(const uint8_t *in, size_t n, char *out, size_t cap);

#endif
