/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h - pieces of pkg/rpc shared between its files and unit tests. */
#ifndef RPC_INTERNAL_H
#define RPC_INTERNAL_H

#include <stddef.h>

#include "rpc/rpc.h"

/* A bump allocator for one call: everything a handler allocates dies with
 * the call, so handlers never free. The first chunk is kept across calls. */
typedef struct rpc__chunk rpc__chunk_t;
typedef struct rpc__arena {
    rpc__chunk_t *head;
    size_t total; /* bytes handed out since the last reset */
} rpc__arena_t;

void rpc__arena_init(rpc__arena_t *a);
void *rpc__arena_alloc(rpc__arena_t *a, size_t n);
void rpc__arena_reset(rpc__arena_t *a); /* keeps the first chunk */
void rpc__arena_dispose(rpc__arena_t *a);
/* A protobuf-c allocator drawing from the arena (free is a no-op). */
ProtobufCAllocator rpc__arena_allocator(rpc__arena_t *a);

struct rpc_ctx {
    const rpc_method_t *method;
    uint64_t deadline_ns;
    void *worker;
    void *app;
    grpc_call *call;
    const grpc_metadata_array *md;
    bool dependency_failure;
    bool public_message; /* rpc_ctx_set_message_public() was called */
    bool has_pushback;   /* rpc_ctx_set_pushback_ms() was called ... */
    char pushback[12];   /* ... with this value, in decimal          */
    /* The error details the handler set (rpc.h, "Error details"): reason a
     * constant, the other strings in the arena; NULL: not set. */
    const char *reason;
    const char *meta_key[RPC_ERROR_METADATA_MAX], *meta_value[RPC_ERROR_METADATA_MAX];
    size_t n_meta;
    const char *bad_field;
    /* Header metadata the handler added (rpc_ctx_add_header_md), in the arena. */
    grpc_metadata header_md[RPC_HEADER_MD_MAX];
    size_t n_header_md;
    rpc__arena_t arena;
};

/* Clears what a handler may set about its reply (the fields above). */
void rpc__ctx_reset_reply(rpc_ctx_t *c);

/*
 * The packed google.rpc.Status of a failed reply (rpc.h, "Error details"):
 * code and message as sent, domain for its ErrorInfo, the rest from ctx.
 * An empty slice when it cannot be built (out of memory), and the reply
 * goes without. Owned by caller (grpc_slice_unref).
 */
grpc_slice rpc__status_details(const rpc_ctx_t *ctx, int code, const char *message,
                               const char *domain);

/*
 * The transport-free half of serving a call: refuse an expired deadline,
 * decode `in` (into the arena), run the handler. The caller encodes *resp.
 */
svc_err_t rpc__dispatch(rpc_ctx_t *ctx, const uint8_t *in, size_t in_len, ProtobufCMessage **resp,
                        char errbuf[static SVC_ERRBUF_LEN]);

/* Checks a method table: every path "/pkg.Service/Method", no path twice,
 * descriptor and handler set. SVC_EINVAL naming the bad entry. */
svc_err_t rpc__methods_validate(const rpc_method_t *methods, size_t n,
                                char errbuf[static SVC_ERRBUF_LEN]);
/* The method with this path; NULL when the table has none. */
const rpc_method_t *rpc__method_find(const rpc_method_t *methods, size_t n, const char *path);

#endif
