/* SPDX-License-Identifier: Apache-2.0 */
/* err.c - the error table of svc/core.h: names, texts and the gRPC mapping. */
#include <stdarg.h>
#include <stdio.h>

#include "svc/core.h"

static const struct {
    const char *name;
    const char *text;
    int grpc;
} err_table[] = {
#define SVC_XX(name, grpc, text) {#name, text, grpc},
    SVC_ERR_MAP(SVC_XX)
#undef SVC_XX
};

/* gRPC's spelling of each status code, indexed by code. */
static const char *const grpc_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

static int valid(svc_err_t e)
{
    return (unsigned)e < SVC__ERR_LAST;
}

const char *svc_strerror(svc_err_t e)
{
    return valid(e) ? err_table[e].text : "invalid error code";
}

const char *svc_err_name(svc_err_t e)
{
    return grpc_names[svc_err_to_grpc(e)];
}

const char *svc_grpc_code_name(int grpc_code)
{
    return grpc_code >= 0 && grpc_code < (int)SVC_COUNTOF(grpc_names) ? grpc_names[grpc_code]
                                                                      : "UNKNOWN";
}

int svc_err_to_grpc(svc_err_t e)
{
    return valid(e) ? err_table[e].grpc : 2 /* UNKNOWN */;
}

svc_err_t svc_err_from_grpc(int grpc_code)
{
    /* The first entry with the code wins, so ENOMEM (an alias of 8) is
     * never produced from the wire. */
    for (int i = 0; i < SVC__ERR_LAST; i++)
        if (err_table[i].grpc == grpc_code)
            return (svc_err_t)i;
    return SVC_EUNKNOWN;
}

void svc_errbuf_set(char errbuf[static SVC_ERRBUF_LEN], const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(errbuf, SVC_ERRBUF_LEN, fmt, ap);
    va_end(ap);
}
