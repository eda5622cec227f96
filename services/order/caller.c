/* SPDX-License-Identifier: Apache-2.0 */
/* caller.c - the owner rule of the order service (contract in caller.h). */
#include <string.h>

#include "caller.h"

/* One entry of key, exactly: absent, repeated or empty is no principal. */
static bool one_entry(rpc_ctx_t *ctx, const char *key, const char **v, size_t *len)
{
    return rpc_ctx_metadata_n(ctx, key, v, len) == RPC_MD_ONE;
}

svc_err_t ord_caller_get(rpc_ctx_t *ctx, pr_scopes_t any, ord_caller_t *out,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    const char *v = NULL;
    size_t len = 0;

    memset(out, 0, sizeof *out);
    if (!one_entry(ctx, PR_MD_SUBJECT, &v, &len) || !pr_subject_valid(v, len)) {
        svc_errbuf_set(errbuf, "the call carries no valid caller (" PR_MD_SUBJECT "): "
                               "orders are placed and read through the gateway");
        return SVC_EUNAUTH;
    }
    memcpy(out->subject, v, len);
    out->subject[len] = '\0';
    switch (rpc_ctx_metadata_n(ctx, PR_MD_SCOPES, &v, &len)) {
    case RPC_MD_ABSENT:
        break;
    case RPC_MD_ONE:
        out->scopes = pr_scopes_parse(v, len);
        break;
    case RPC_MD_REPEATED:
        svc_errbuf_set(errbuf, PR_MD_SCOPES " must be given once");
        return SVC_EUNAUTH;
    }
    if ((out->scopes & any) == 0) {
        char need[PR_SCOPES_TEXT_MAX];
        pr_scopes_format(any, need, sizeof need);
        svc_errbuf_set(errbuf, "the caller's token lacks the scope %s", need);
        return SVC_EPERM;
    }
    return SVC_OK;
}

svc_err_t ord_caller_customer(const ord_caller_t *c, const char *requested, const char **customer,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    if (requested == NULL || requested[0] == '\0') {
        *customer = c->subject;
        return SVC_OK;
    }
    if (strcmp(requested, c->subject) != 0) {
        svc_errbuf_set(errbuf, "customer_id names another customer than the caller");
        return SVC_EPERM;
    }
    *customer = requested;
    return SVC_OK;
}

bool ord_caller_may_read(const ord_caller_t *c, const char *customer)
{
    return (c->scopes & PR_SCOPE_ORDERS_ADMIN) != 0 ||
           (customer != NULL && strcmp(customer, c->subject) == 0);
}
