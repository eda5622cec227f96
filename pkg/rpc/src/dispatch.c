/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch.c - the per-call work that does not touch the network: arena,
 * deadline check, decoding, the handler call, and the handler's view of the
 * call (rpc_ctx_*).
 */
#include <inttypes.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNK_MIN 8192

struct rpc__chunk {
    rpc__chunk_t *next;
    size_t cap, used;
    alignas(max_align_t) unsigned char data[];
};

void rpc__arena_init(rpc__arena_t *a)
{
    a->head = NULL;
    a->total = 0;
}

void *rpc__arena_alloc(rpc__arena_t *a, size_t n)
{
    const size_t align = alignof(max_align_t);
    rpc__chunk_t *c = a->head;

    n = (n + align - 1) & ~(align - 1);
    if (n == 0)
        n = align;
    if (a->total + n > RPC_ARENA_MAX)
        return NULL;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        rpc__chunk_t *nc = malloc(sizeof *nc + cap);
        if (nc == NULL)
            return NULL;
        nc->cap = cap;
        nc->used = 0;
        nc->next = c;
        a->head = c = nc;
    }
    c->used += n;
    a->total += n;
    return c->data + c->used - n;
}

void rpc__arena_reset(rpc__arena_t *a)
{
    rpc__chunk_t *c = a->head;

    /* Keep the oldest chunk: most calls fit in it, so steady state is
     * allocation-free. */
    while (c != NULL && c->next != NULL) {
        rpc__chunk_t *next = c->next;
        free(c);
        c = next;
    }
    if (c != NULL)
        c->used = 0;
    a->head = c;
    a->total = 0;
}

void rpc__arena_dispose(rpc__arena_t *a)
{
    rpc__arena_reset(a);
    free(a->head);
    a->head = NULL;
}

static void *arena_pb_alloc(void *data, size_t n)
{
    return rpc__arena_alloc(data, n);
}

static void arena_pb_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

ProtobufCAllocator rpc__arena_allocator(rpc__arena_t *a)
{
    return (ProtobufCAllocator){arena_pb_alloc, arena_pb_free, a};
}

const rpc_method_t *rpc__method_find(const rpc_method_t *methods, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(methods[i].path, path) == 0)
            return &methods[i];
    return NULL;
}

svc_err_t rpc__methods_validate(const rpc_method_t *methods, size_t n,
                                char errbuf[static SVC_ERRBUF_LEN])
{
    if (n == 0) {
        svc_errbuf_set(errbuf, "method table is empty");
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = methods[i].path, *slash = p != NULL ? strrchr(p, '/') : NULL;

        if (p == NULL || p[0] != '/' || slash == p || slash[1] == '\0') {
            svc_errbuf_set(errbuf, "method %zu: path must be /package.Service/Method", i);
            return SVC_EINVAL;
        }
        if (methods[i].request == NULL || methods[i].handler == NULL) {
            svc_errbuf_set(errbuf, "method %s: request descriptor and handler are required", p);
            return SVC_EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(methods[j].path, p) == 0) {
                svc_errbuf_set(errbuf, "method %s is listed twice", p);
                return SVC_EINVAL;
            }
        }
    }
    return SVC_OK;
}

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0)
            return true;
    }
    return false;
}

/*
 * True when a string field anywhere in the encoded message holds a NUL.
 * proto3 allows it, but protobuf-c hands handlers NUL-terminated strings,
 * so "a\0b" would silently become "a": such a request is refused instead.
 * Runs on input protobuf-c has already parsed, so it can stop at oddities.
 */
static bool has_nul_string(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                           const uint8_t *end, int depth)
{
    uint64_t tag, len;

    while (p < end && depth < 32 && read_varint(&p, end, &tag)) {
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &len))
                return false;
            break;
        case 1:
            p += 8;
            break;
        case 5:
            p += 4;
            break;
        case 2:
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p))
                return false;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, len) != NULL)
                return true;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                has_nul_string(f->descriptor, p, p + len, depth + 1))
                return true;
            p += len;
            break;
        default:
            return false;
        }
    }
    return false;
}

svc_err_t rpc__dispatch(rpc_ctx_t *ctx, const uint8_t *in, size_t in_len, ProtobufCMessage **resp,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    ProtobufCAllocator alloc = rpc__arena_allocator(&ctx->arena);
    ProtobufCMessage *req;

    *resp = NULL;
    /* Work whose caller has already given up is wasted work: skip it. */
    if (ctx->deadline_ns != SVC_DEADLINE_NONE && svc_now_ns() >= ctx->deadline_ns) {
        svc_errbuf_set(errbuf, "deadline expired before the call was served");
        return SVC_ETIMEDOUT;
    }
    req = protobuf_c_message_unpack(ctx->method->request, &alloc, in_len, in);
    if (req == NULL) {
        svc_errbuf_set(errbuf, "request is not a valid %s", ctx->method->request->name);
        return SVC_EINVAL;
    }
    if (in_len > 0 && has_nul_string(ctx->method->request, in, in + in_len, 0)) {
        svc_errbuf_set(errbuf, "strings must not contain NUL characters");
        return SVC_EINVAL;
    }
    return ctx->method->handler(ctx, req, resp, errbuf);
}

uint64_t rpc_ctx_deadline(const rpc_ctx_t *c)
{
    return c->deadline_ns;
}

void *rpc_ctx_worker(rpc_ctx_t *c)
{
    return c->worker;
}

void *rpc_ctx_app(rpc_ctx_t *c)
{
    return c->app;
}

void rpc_ctx_mark_dependency_failure(rpc_ctx_t *c)
{
    c->dependency_failure = true;
}

void rpc_ctx_set_message_public(rpc_ctx_t *c)
{
    c->public_message = true;
}

void rpc_ctx_set_pushback_ms(rpc_ctx_t *c, uint32_t ms)
{
    snprintf(c->pushback, sizeof c->pushback, "%" PRIu32, ms);
    c->has_pushback = true;
}

grpc_call *rpc_ctx_call(rpc_ctx_t *c)
{
    return c->call;
}

void *rpc_ctx_alloc(rpc_ctx_t *c, size_t n)
{
    return rpc__arena_alloc(&c->arena, n);
}

static void *ctx_alloc_fn(void *ctx, size_t n)
{
    return rpc_ctx_alloc(ctx, n);
}

svc_alloc_t rpc_ctx_allocator(rpc_ctx_t *c)
{
    return (svc_alloc_t){ctx_alloc_fn, c};
}

char *rpc_ctx_strdup(rpc_ctx_t *c, const char *s)
{
    svc_alloc_t a = rpc_ctx_allocator(c);

    return svc_alloc_strdup(&a, s);
}

rpc_md_presence_t rpc_ctx_metadata_n(rpc_ctx_t *c, const char *key, const char **value, size_t *len)
{
    return rpc_md_lookup(c->md, key, value, len);
}

const char *rpc_ctx_metadata(rpc_ctx_t *c, const char *key)
{
    const char *v;
    size_t n;
    char *copy;

    if (!rpc_md_find(c->md, key, &v, &n))
        return NULL;
    copy = rpc__arena_alloc(&c->arena, n + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, v, n);
    copy[n] = '\0';
    return copy;
}
