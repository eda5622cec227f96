/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admit.h - the front door of a matched request (guard.h's check through
 * door.h, on h2o's request): its Authorization header and its peer's
 * address in, and either an admission (the principal, when the token
 * verified, and the RateLimit headers on the answer to come) or the
 * refusal answered here:
 *
 *   401  code 16  WWW-Authenticate: Bearer realm="shopmicro"[, error="invalid_token"]
 *   403  code 7   WWW-Authenticate: Bearer ..., error="insufficient_scope", scope="..."
 *   429  code 8   Retry-After, RateLimit-Policy, RateLimit
 *   500  code 13  the token could not be checked (never the token's fault)
 *
 * with a google.rpc.Status body of fixed text; why a token was refused goes
 * only to the access line (auth_error=). Loop thread only.
 */
#ifndef GW_ADMIT_H
#define GW_ADMIT_H

#include <stdbool.h>

#include "access.h"
#include "jwt.h"

/* e->route is the matched row. True: admitted, with *who the principal
 * and e->sub set when the request had a valid token (*authenticated).
 * False: answered. */
bool gw_admit(gw_loop_t *l, h2o_req_t *req, gw_access_t *e, gw_principal_t *who,
              bool *authenticated);

#endif
