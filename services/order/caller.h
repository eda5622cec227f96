/* SPDX-License-Identifier: Apache-2.0 */
/*
 * caller.h - who calls the order service, and what they may do.
 *
 * Every call carries the principal the gateway verified (pkg/principal: the
 * subject and the scopes, in gRPC metadata). The rules are the gateway's,
 * enforced again here so that the gRPC API holds them by itself:
 *
 *   CreateOrder  needs orders:write; the order is the subject's: a request
 *                that names another customer is PERMISSION_DENIED, one that
 *                names none is placed for the subject.
 *   GetOrder     needs orders:read (or orders:admin); another customer's
 *                order is NOT_FOUND, worded as an unknown id so that ids of
 *                others' orders cannot be probed, unless orders:admin.
 *
 * A call without a valid subject, or with an entry given twice, is
 * UNAUTHENTICATED.
 */
#ifndef ORD_CALLER_H
#define ORD_CALLER_H

#include <stdbool.h>

#include "principal/principal.h"
#include "rpc/rpc.h"

typedef struct ord_caller {
    char subject[PR_SUBJECT_MAX + 1];
    pr_scopes_t scopes;
} ord_caller_t;

/* Reads the call's principal and checks it has one of the scopes in any.
 * SVC_EUNAUTH (no or a malformed principal) or SVC_EPERM (none of the
 * scopes), with the client-facing reason in errbuf. */
svc_err_t ord_caller_get(rpc_ctx_t *ctx, pr_scopes_t any, ord_caller_t *out,
                         char errbuf[static SVC_ERRBUF_LEN]);

/* The customer an order is placed for: the request's customer_id when it is
 * empty or the caller's own, else SVC_EPERM. *customer is the caller's
 * subject or the request's own string. */
svc_err_t ord_caller_customer(const ord_caller_t *c, const char *requested, const char **customer,
                              char errbuf[static SVC_ERRBUF_LEN]);

/* Whether the caller may see an order of customer. */
bool ord_caller_may_read(const ord_caller_t *c, const char *customer);

#endif
