/* SPDX-License-Identifier: Apache-2.0 */
/*
 * principal.h - who is calling, as the internal plane carries it.
 *
 * The gateway verifies a client's bearer token and passes what it proved to
 * the services in two gRPC metadata entries (docs/gateway.md, "Security"):
 *
 *   x-shopmicro-subject  the token's sub: the customer the call is made for
 *   x-shopmicro-scopes   the scopes of the token this API knows, space-separated
 *
 * A service that enforces an owner rule (order: a customer places and reads
 * only their own orders) reads both and refuses a call without them. The
 * entries are trusted as the gateway's word: a client that reaches a
 * service's gRPC port directly could claim any subject, which is why those
 * ports listen on loopback or inside the cluster only, until the internal
 * plane authenticates its peers.
 *
 * Pure functions, thread-safe.
 */
#ifndef PRINCIPAL_PRINCIPAL_H
#define PRINCIPAL_PRINCIPAL_H

#include <stdbool.h>
#include <stddef.h>

#define PR_MD_SUBJECT "x-shopmicro-subject"
#define PR_MD_SCOPES  "x-shopmicro-scopes"

/* Longest subject, in bytes: the longest customer id. */
#define PR_SUBJECT_MAX 100
/* Room for every known scope's name, spaces and the NUL. */
#define PR_SCOPES_TEXT_MAX 64

/* The scopes this API knows; a token's others are ignored. */
typedef enum pr_scope {
    PR_SCOPE_CATALOG_WRITE = 1u << 0, /* "catalog:write": create products */
    PR_SCOPE_ORDERS_WRITE = 1u << 1,  /* "orders:write": place orders */
    PR_SCOPE_ORDERS_READ = 1u << 2,   /* "orders:read": read one's own orders */
    PR_SCOPE_ORDERS_ADMIN = 1u << 3,  /* "orders:admin": read anyone's orders */
} pr_scope_t;

/* A set of pr_scope_t bits. */
typedef unsigned pr_scopes_t;

/* The known scopes named in a space-separated list (RFC 6749 §3.3: names are
 * case-sensitive; unknown names are skipped, since a token may carry scopes
 * of other APIs). */
pr_scopes_t pr_scopes_parse(const char *s, size_t len);
/* The known scopes of set, space-separated, into out (cap bytes, at least
 * PR_SCOPES_TEXT_MAX for every set); returns the length. "" for none. */
size_t pr_scopes_format(pr_scopes_t set, char *out, size_t cap);
/* The name of one scope bit; "" when it is not one. */
const char *pr_scope_name(pr_scope_t scope);
/* Whether s (len bytes) may be a subject: 1..PR_SUBJECT_MAX bytes of
 * letters, digits and "-._~:@|+" - what identity providers use for sub
 * (UUIDs, "auth0|…", e-mail addresses), and safe as a customer id, a log
 * value and a metadata value. */
bool pr_subject_valid(const char *s, size_t len);

#endif
