/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.c - what a handler says about its reply beyond the message: the
 * error details of a failure (rpc.h, "Error details"), with the
 * google.rpc.Status packed from them for trailer grpc-status-details-bin,
 * and the header metadata of any reply (rpc_ctx_add_header_md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "internal.h"

void rpc__ctx_reset_reply(rpc_ctx_t *c)
{
    c->dependency_failure = false;
    c->public_message = false;
    c->has_pushback = false;
    c->reason = NULL;
    c->n_meta = 0;
    c->bad_field = NULL;
    c->n_header_md = 0;
}

/* Copies key and value into the call's arena; false when either does not fit. */
static bool dup_pair(rpc_ctx_t *c, const char *key, const char *value, const char **k,
                     const char **v)
{
    *k = rpc_ctx_strdup(c, key);
    *v = rpc_ctx_strdup(c, value);
    return *k != NULL && *v != NULL;
}

void rpc_ctx_add_header_md(rpc_ctx_t *c, const char *key, const char *value)
{
    const char *k, *v;

    if (c->n_header_md == RPC_HEADER_MD_MAX || !dup_pair(c, key, value, &k, &v))
        return;
    /* Static slices: the strings live in the arena until the reply is sent. */
    memset(&c->header_md[c->n_header_md], 0, sizeof c->header_md[0]);
    c->header_md[c->n_header_md].key = grpc_slice_from_static_string(k);
    c->header_md[c->n_header_md++].value = grpc_slice_from_static_string(v);
}

void rpc_ctx_set_error_reason(rpc_ctx_t *c, const char *reason)
{
    c->reason = reason;
}

void rpc_ctx_add_error_metadata(rpc_ctx_t *c, const char *key, const char *value)
{
    const char *k, *v;

    if (c->n_meta == RPC_ERROR_METADATA_MAX || !dup_pair(c, key, value, &k, &v))
        return;
    c->meta_key[c->n_meta] = k;
    c->meta_value[c->n_meta++] = v;
}

void rpc_ctx_set_bad_field(rpc_ctx_t *c, const char *field)
{
    c->bad_field = rpc_ctx_strdup(c, field);
}

/* Packs m into a new Any in the arena; false when out of memory. */
static bool pack_any(rpc_ctx_t *c, const ProtobufCMessage *m, Google__Protobuf__Any *any)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    size_t url_len = sizeof RPC_TYPE_URL_PREFIX - 1 + strlen(m->descriptor->name);
    char *url = rpc_ctx_alloc(c, url_len + 1);
    uint8_t *bytes = rpc_ctx_alloc(c, n > 0 ? n : 1);

    if (url == NULL || bytes == NULL)
        return false;
    snprintf(url, url_len + 1, "%s%s", RPC_TYPE_URL_PREFIX, m->descriptor->name);
    google__protobuf__any__init(any);
    any->type_url = url;
    any->value.len = protobuf_c_message_pack(m, bytes);
    any->value.data = bytes;
    return true;
}

grpc_slice rpc__status_details(const rpc_ctx_t *ctx_, int code, const char *message,
                               const char *domain)
{
    /* The arena is the call's; packing into it does not change what the
     * handler set, so ctx is const to the caller. */
    rpc_ctx_t *c = (rpc_ctx_t *)ctx_;
    Google__Rpc__ErrorInfo info = GOOGLE__RPC__ERROR_INFO__INIT;
    Google__Rpc__ErrorInfo__MetadataEntry meta[RPC_ERROR_METADATA_MAX];
    Google__Rpc__ErrorInfo__MetadataEntry *meta_p[RPC_ERROR_METADATA_MAX];
    Google__Rpc__RetryInfo retry = GOOGLE__RPC__RETRY_INFO__INIT;
    Google__Protobuf__Duration delay = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Rpc__BadRequest bad = GOOGLE__RPC__BAD_REQUEST__INIT;
    Google__Rpc__BadRequest__FieldViolation fv = GOOGLE__RPC__BAD_REQUEST__FIELD_VIOLATION__INIT;
    Google__Rpc__BadRequest__FieldViolation *fv_p = &fv;
    Google__Protobuf__Any any[3], *any_p[3];
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    grpc_slice out;
    size_t n = 0;

    info.reason = (char *)(c->reason != NULL ? c->reason : svc_grpc_code_name(code));
    info.domain = (char *)domain;
    for (size_t i = 0; i < c->n_meta; i++) {
        google__rpc__error_info__metadata_entry__init(&meta[i]);
        meta[i].key = (char *)c->meta_key[i];
        meta[i].value = (char *)c->meta_value[i];
        meta_p[i] = &meta[i];
    }
    info.metadata = meta_p;
    info.n_metadata = c->n_meta;
    if (!pack_any(c, &info.base, &any[n]))
        return grpc_empty_slice();
    any_p[n] = &any[n], n++;
    if (c->has_pushback) {
        unsigned long ms = strtoul(c->pushback, NULL, 10);
        delay.seconds = (int64_t)(ms / 1000);
        delay.nanos = (int32_t)(ms % 1000) * 1000000;
        retry.retry_delay = &delay;
        if (!pack_any(c, &retry.base, &any[n]))
            return grpc_empty_slice();
        any_p[n] = &any[n], n++;
    }
    if (c->bad_field != NULL && code == 3 /* INVALID_ARGUMENT */) {
        fv.field = (char *)c->bad_field;
        fv.description = (char *)message;
        bad.field_violations = &fv_p;
        bad.n_field_violations = 1;
        if (!pack_any(c, &bad.base, &any[n]))
            return grpc_empty_slice();
        any_p[n] = &any[n], n++;
    }
    st.code = code;
    st.message = (char *)message;
    st.details = any_p;
    st.n_details = n;
    out = grpc_slice_malloc(protobuf_c_message_get_packed_size(&st.base));
    protobuf_c_message_pack(&st.base, GRPC_SLICE_START_PTR(out));
    return out;
}
