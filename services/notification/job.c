/* SPDX-License-Identifier: Apache-2.0 */
/* job.c - a notification job's body, and the verdict on a delivery (job.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "pbj/pbjson.h"
#include "shopmicro/events/v1/events.pb-c.h"

static const char *const known_types[] = {NTF_TYPE_CREATED, NTF_TYPE_CONFIRMED, NTF_TYPE_CANCELLED,
                                          NULL};
enum { KIND_CREATED, KIND_CONFIRMED, KIND_CANCELLED };

static ntf_kind_t poison(char *reason, const char *what, const char *detail)
{
    snprintf(reason, KFK_REASON_LEN, "%s%.160s", what, detail);
    return NTF_POISON;
}

/* s as a JSON string literal (quotes included) at out; the length written.
 * out has room for 6 bytes per byte of s plus 3. */
static size_t json_str(char *out, const char *s)
{
    size_t n = 0;

    out[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            out[n++] = '\\';
            out[n++] = (char)*p;
        } else if (*p < 0x20) {
            n += (size_t)sprintf(out + n, "\\u%04x", *p);
        } else {
            out[n++] = (char)*p;
        }
    }
    out[n++] = '"';
    out[n] = '\0';
    return n;
}

/* The event's payload as protojson (pbj_free it). */
static ProtobufCMessage *unpack(size_t kind, const kfk_record_t *r)
{
    const uint8_t *v = r->value;

    if (kind == KIND_CONFIRMED)
        return (ProtobufCMessage *)shopmicro__events__v1__order_confirmed__unpack(NULL,
                                                                                  r->value_len, v);
    return (ProtobufCMessage *)shopmicro__events__v1__order_cancelled__unpack(NULL, r->value_len,
                                                                              v);
}

/* The CloudEvent around data (structured mode). */
static char *envelope(const char *id, const char *type, const char *source, const char *time,
                      const char *data, size_t data_len, size_t *len)
{
    char eid[6 * 256 + 3], etype[6 * 256 + 3], esrc[6 * 256 + 3], etime[6 * 64 + 3];
    size_t cap;
    char *out;
    int n;

    json_str(eid, id);
    json_str(etype, type);
    json_str(esrc, source);
    json_str(etime, time);
    cap = strlen(eid) + strlen(etype) + strlen(esrc) + strlen(etime) + data_len + 128;
    if ((out = malloc(cap)) == NULL)
        return NULL;
    n = snprintf(out, cap,
                 "{\"specversion\":\"1.0\",\"id\":%s,\"type\":%s,\"source\":%s,\"time\":%s,"
                 "\"datacontenttype\":\"application/json\",\"data\":%.*s}",
                 eid, etype, esrc, etime, (int)data_len, data);
    if (n < 0 || (size_t)n >= cap) {
        free(out);
        return NULL;
    }
    *len = (size_t)n;
    return out;
}

ntf_kind_t ntf_job_from_record(const kfk_record_t *r, char **body, size_t *len, char *reason)
{
    char type[256], source[256], time[64], errbuf[SVC_ERRBUF_LEN] = "";
    size_t kind = 0, json_len = 0;
    ProtobufCMessage *m;
    char *json = NULL;

    *body = NULL;
    *len = 0;
    kfk_record_header(r, "ce_type", type, sizeof type);
    switch (kfk_ce_type_match(type, known_types, &kind)) {
    case KFK_TYPE_NEWER:
        return poison(reason, "a newer schema than this service reads: ", type);
    case KFK_TYPE_UNKNOWN:
        return poison(reason, "no order event this service knows: ce_type ", type);
    case KFK_TYPE_KNOWN:
        break;
    }
    if (kind == KIND_CREATED)
        return NTF_SKIP;
    /* The id is also the Idempotency-Key and the webhook-id. */
    if (r->ce_id == NULL || !svc_idempotency_key_valid(r->ce_id, strlen(r->ce_id)))
        return poison(reason, "no ce_id usable as an Idempotency-Key", "");
    if (!kfk_record_header(r, "ce_source", source, sizeof source))
        return poison(reason, "no ce_source header", "");
    if (!kfk_record_header(r, "ce_time", time, sizeof time))
        return poison(reason, "no ce_time header", "");
    if ((m = unpack(kind, r)) == NULL)
        return poison(reason, "the value is not the protobuf its ce_type says: ", type);
    if (pbj_encode(m, NULL, &json, &json_len, errbuf) == SVC_OK)
        *body = envelope(r->ce_id, type, source, time, json, json_len, len);
    protobuf_c_message_free_unpacked(m, NULL);
    pbj_free(NULL, json);
    if (*body == NULL)
        return poison(reason,
                      "cannot render the event as JSON: ", errbuf[0] ? errbuf : "no memory");
    return NTF_JOB;
}

ntf_next_t ntf_next_of(const rs_http_result_t *res)
{
    if (res->err == SVC_OK)
        return NTF_ACK;
    if (res->reason == RS_REASON_CANCELLED || res->err == SVC_ECANCELLED)
        return NTF_REQUEUE;
    /* A 4xx is the receiver's final word, except the ones that mean "later". */
    if (res->status >= 400 && res->status < 500 && res->status != 408 && res->status != 425 &&
        res->status != 429)
        return NTF_DEAD;
    return NTF_RETRY;
}

void ntf_dead_reason(const rs_http_result_t *res, ntf_next_t next, char *out, size_t cap)
{
    if (next == NTF_DEAD)
        snprintf(out, cap, "http-%d", res->status);
    else if (res->reason == RS_REASON_OK || res->reason == RS_REASON_RETRIED)
        snprintf(out, cap, "http-%d", res->status);
    else
        snprintf(out, cap, "%s", rs_reason_name(res->reason));
}
