/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ce.c - the CloudEvents Kafka binding's headers, binary mode.
 *
 * Header names are the spec's: attributes as ce_<name>, and the data's
 * media type as plain content-type (the binding maps datacontenttype there,
 * so that tools which know nothing of CloudEvents still read it).
 */
#include <string.h>

#include "kafka/kafka.h"

static bool empty(const char *s)
{
    return s == NULL || s[0] == '\0';
}

static void put(kfk_header_t *out, size_t *n, const char *name, const char *value)
{
    out[*n].name = name;
    out[*n].value = value;
    out[*n].len = strlen(value);
    (*n)++;
}

svc_err_t kfk_ce_headers(const kfk_ce_t *ce, kfk_header_t out[KFK_CE_MAX_HEADERS], size_t *n,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    *n = 0;
    /* The three attributes the spec requires besides specversion. */
    if (empty(ce->id) || empty(ce->type) || empty(ce->source)) {
        svc_errbuf_set(errbuf, "cloudevent: ce_%s is required",
                       empty(ce->id)     ? "id"
                       : empty(ce->type) ? "type"
                                         : "source");
        return SVC_EINVAL;
    }
    put(out, n, "ce_specversion", KFK_CE_SPECVERSION);
    put(out, n, "ce_id", ce->id);
    put(out, n, "ce_type", ce->type);
    put(out, n, "ce_source", ce->source);
    if (!empty(ce->time))
        put(out, n, "ce_time", ce->time);
    put(out, n, "content-type",
        empty(ce->content_type) ? KFK_CE_DEFAULT_CONTENT_TYPE : ce->content_type);
    if (!empty(ce->request_id))
        put(out, n, "x-request-id", ce->request_id);
    return SVC_OK;
}
