/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status.c - the error body (status.h): google.rpc.Status in protojson with
 * its details, from the gateway's own verdict and the upstream's Status.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "status.h"
#include "svc/core.h"

/* Copies len bytes at buf + pos if they fit below cap - 1; returns the new
 * logical position either way (snprintf semantics). */
static size_t put(char *buf, size_t cap, size_t pos, const char *s, size_t len)
{
    if (cap > 0 && pos < cap - 1) {
        size_t room = cap - 1 - pos, n = len < room ? len : room;
        memcpy(buf + pos, s, n);
        buf[pos + n] = '\0';
    }
    return pos + len;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return need;
}

size_t gw_json_escape(char *buf, size_t cap, size_t pos, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        unsigned char c = p[i];
        size_t run = i;
        char esc[8];

        /* Copy a run of bytes that need no escaping in one go. */
        while (run < len && p[run] >= 0x20 && p[run] != '"' && p[run] != '\\' && p[run] < 0x80)
            run++;
        if (run > i) {
            pos = put(buf, cap, pos, s + i, run - i);
            i = run;
            continue;
        }
        c = p[i];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            pos = put(buf, cap, pos, esc, 2);
            i++;
        } else if (c < 0x20) {
            static const char short_esc[] = {
                ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
            if (c < sizeof short_esc && short_esc[c] != 0) {
                esc[0] = '\\';
                esc[1] = short_esc[c];
                pos = put(buf, cap, pos, esc, 2);
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                pos = put(buf, cap, pos, esc, 6);
            }
            i++;
        } else {
            size_t n = utf8_len(p + i, len - i);
            if (n == 0) {
                pos = put(buf, cap, pos, "\xef\xbf\xbd", 3); /* U+FFFD, as Go writes it */
                i++;
            } else {
                pos = put(buf, cap, pos, s + i, n);
                i += n;
            }
        }
    }
    return pos;
}

static size_t put_str(char *buf, size_t cap, size_t pos, const char *s)
{
    return put(buf, cap, pos, s, strlen(s));
}

/* "key":"value" (value escaped), with a leading comma unless first. */
static size_t put_member(char *buf, size_t cap, size_t pos, bool first, const char *key,
                         const char *value)
{
    pos = put_str(buf, cap, pos, first ? "\"" : ",\"");
    pos = put_str(buf, cap, pos, key);
    pos = put_str(buf, cap, pos, "\":\"");
    pos = gw_json_escape(buf, cap, pos, value, strlen(value));
    return put(buf, cap, pos, "\"", 1);
}

/* {"@type":"type.googleapis.com/<name>", - the start of a detail. */
static size_t put_type(char *buf, size_t cap, size_t pos, const ProtobufCMessageDescriptor *d)
{
    pos = put_str(buf, cap, pos, "{\"@type\":\"" RPC_TYPE_URL_PREFIX);
    pos = put_str(buf, cap, pos, d->name);
    return put(buf, cap, pos, "\"", 1);
}

typedef const Google__Rpc__ErrorInfo__MetadataEntry *meta_t;

static int meta_cmp(const void *a, const void *b)
{
    return strcmp((*(const meta_t *)a)->key, (*(const meta_t *)b)->key);
}

/* An ErrorInfo; metadata in key order, as Go writes a map, and at most 16
 * entries of it (ours have at most RPC_ERROR_METADATA_MAX). */
static size_t put_error_info(char *buf, size_t cap, size_t pos, const Google__Rpc__ErrorInfo *info)
{
    meta_t sorted[RPC_ERROR_METADATA_MAX * 4];
    size_t n = info->n_metadata < SVC_COUNTOF(sorted) ? info->n_metadata : SVC_COUNTOF(sorted);

    if (n > 0) { /* protobuf-c leaves metadata NULL when there is none */
        memcpy(sorted, info->metadata, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, meta_cmp);
    }
    pos = put_type(buf, cap, pos, &google__rpc__error_info__descriptor);
    pos = put_member(buf, cap, pos, false, "reason", info->reason);
    pos = put_member(buf, cap, pos, false, "domain", info->domain);
    pos = put_str(buf, cap, pos, ",\"metadata\":{");
    for (size_t i = 0; i < n; i++)
        pos = put_member(buf, cap, pos, i == 0, sorted[i]->key, sorted[i]->value);
    return put_str(buf, cap, pos, "}}");
}

static size_t put_bad_request(char *buf, size_t cap, size_t pos, const Google__Rpc__BadRequest *b)
{
    pos = put_type(buf, cap, pos, &google__rpc__bad_request__descriptor);
    pos = put_str(buf, cap, pos, ",\"fieldViolations\":[");
    for (size_t i = 0; i < b->n_field_violations; i++) {
        const Google__Rpc__BadRequest__FieldViolation *v = b->field_violations[i];
        pos = put_str(buf, cap, pos, i == 0 ? "{" : ",{");
        pos = put_member(buf, cap, pos, true, "field", v->field);
        pos = put_member(buf, cap, pos, false, "description", v->description);
        pos = put(buf, cap, pos, "}", 1);
    }
    return put_str(buf, cap, pos, "]}");
}

/* The details of the upstream's Status that the body keeps (status.h), and
 * the first ErrorInfo; Status is NULL when there is none or it does not
 * decode. */
typedef struct upstream_details {
    Google__Rpc__Status *status;
    Google__Rpc__ErrorInfo *info;
} upstream_details_t;

static void *unpack_any(const Google__Protobuf__Any *any, const ProtobufCMessageDescriptor *d)
{
    size_t prefix = sizeof RPC_TYPE_URL_PREFIX - 1;

    if (strncmp(any->type_url, RPC_TYPE_URL_PREFIX, prefix) != 0 ||
        strcmp(any->type_url + prefix, d->name) != 0)
        return NULL;
    return protobuf_c_message_unpack(d, NULL, any->value.len, any->value.data);
}

static void upstream_open(const rpc_status_details_t *d, upstream_details_t *u)
{
    memset(u, 0, sizeof *u);
    if (d == NULL || d->len == 0)
        return;
    u->status = google__rpc__status__unpack(NULL, d->len, d->bytes);
    for (size_t i = 0; u->status != NULL && u->info == NULL && i < u->status->n_details; i++)
        u->info = unpack_any(u->status->details[i], &google__rpc__error_info__descriptor);
}

static void upstream_close(upstream_details_t *u)
{
    if (u->info != NULL)
        google__rpc__error_info__free_unpacked(u->info, NULL);
    if (u->status != NULL)
        google__rpc__status__free_unpacked(u->status, NULL);
}

/* The upstream's BadRequest details, each with a leading comma. */
static size_t put_upstream_kept(char *buf, size_t cap, size_t pos, const upstream_details_t *u)
{
    for (size_t i = 0; u->status != NULL && i < u->status->n_details; i++) {
        Google__Rpc__BadRequest *b =
            unpack_any(u->status->details[i], &google__rpc__bad_request__descriptor);
        if (b == NULL)
            continue;
        pos = put_bad_request(buf, cap, put(buf, cap, pos, ",", 1), b);
        google__rpc__bad_request__free_unpacked(b, NULL);
    }
    return pos;
}

size_t gw_error_body(char *buf, size_t cap, const gw_error_t *e)
{
    Google__Rpc__ErrorInfo own = GOOGLE__RPC__ERROR_INFO__INIT;
    Google__Rpc__ErrorInfo__MetadataEntry up = GOOGLE__RPC__ERROR_INFO__METADATA_ENTRY__INIT;
    Google__Rpc__ErrorInfo__MetadataEntry *up_p = &up;
    upstream_details_t u;
    char head[48];
    size_t pos;

    if (cap > 0)
        buf[0] = '\0';
    upstream_open(e->details, &u);
    own.reason = (char *)(e->reason != NULL ? e->reason : svc_grpc_code_name(e->code));
    own.domain = (char *)GW_ERROR_DOMAIN;
    if (e->upstream != NULL) {
        up.key = (char *)"upstream";
        up.value = (char *)e->upstream;
        own.metadata = &up_p;
        own.n_metadata = 1;
    }
    snprintf(head, sizeof head, "{\"code\":%d,\"message\":\"", e->code);
    pos = put_str(buf, cap, 0, head);
    pos = gw_json_escape(buf, cap, pos, e->message, strlen(e->message));
    pos = put_str(buf, cap, pos, "\",\"details\":[");
    pos = put_error_info(buf, cap, pos, e->reason == NULL && u.info != NULL ? u.info : &own);
    pos = put_upstream_kept(buf, cap, pos, &u);
    if (e->retry_after_s > 0) {
        char v[48];
        snprintf(v, sizeof v, ",\"retryDelay\":\"%us\"}", e->retry_after_s);
        pos = put_type(buf, cap, put(buf, cap, pos, ",", 1), &google__rpc__retry_info__descriptor);
        pos = put_str(buf, cap, pos, v);
    }
    upstream_close(&u);
    return put_str(buf, cap, pos, "]}");
}
