/* SPDX-License-Identifier: Apache-2.0 */
/*
 * page_token.h - ListProducts' opaque page token (AIP-158).
 *
 * A token names the position after which the next page starts (the last
 * product's sequence number). It is URL-safe base64 of a versioned text
 * with a checksum, so a token that was cut, edited or made up is rejected
 * as INVALID_ARGUMENT instead of silently starting somewhere else.
 */
#ifndef CAT_PAGE_TOKEN_H
#define CAT_PAGE_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

#define CAT_PAGE_TOKEN_MAX 64 /* bytes, including the terminating NUL */

/* Writes the token for "after sequence number `after`" into out. */
void cat_page_token_encode(int64_t after, char out[CAT_PAGE_TOKEN_MAX]);
/* Parses a token. SVC_EINVAL for anything cat_page_token_encode did not make. */
svc_err_t cat_page_token_decode(const char *token, int64_t *after);

#endif
