/* SPDX-License-Identifier: Apache-2.0 */
/*
 * outcome.c - what an HTTP attempt's end means to the engine: the status
 * and curl-result mappings, and which method row (idempotent or not) a
 * request is. Pure functions; the table they implement is in
 * docs/resilience.md §12.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

svc_err_t rs_http__status_err(long status)
{
    if (status >= 200 && status < 300)
        return SVC_OK;
    switch (status) {
    /* The server (or a proxy before it) is overloaded or down: UNAVAILABLE,
     * a breaker failure. The engine's classification then retries 429 and
     * 503 always, and 500/502/504 because the binding opts in. */
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
        return SVC_EUNAVAIL;
    case 400:
    case 422:
        return SVC_EINVAL;
    case 401:
        return SVC_EUNAUTH;
    case 403:
        return SVC_EPERM;
    case 404:
    case 410:
        return SVC_ENOTFOUND;
    case 408:
        return SVC_ETIMEDOUT; /* the server's timer, not ours: never retried */
    case 409:
        return SVC_EEXIST;
    case 412:
        return SVC_EPRECOND;
    case 413:
    case 414:
    case 431:
        return SVC_ERANGE;
    case 501:
        return SVC_EUNIMPL;
    default:
        break;
    }
    /* Another 4xx is the request's fault; another 5xx (or a 1xx/3xx we do
     * not follow) is a server answer we cannot act on. Neither is retried,
     * and the breaker counts both as "it answered". */
    return status >= 400 && status < 500 ? SVC_EINVAL : SVC_EUNKNOWN;
}

svc_err_t rs_http__curl_err(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return SVC_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return SVC_ETIMEDOUT; /* our per-attempt deadline: CURLOPT_TIMEOUT_MS */
    /* Nothing came back: the connection could not be made, broke, or was
     * closed without an answer. Retried only for requests safe to repeat,
     * since a broken connection may have delivered the request. */
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return SVC_EUNAVAIL;
    case CURLE_OUT_OF_MEMORY:
        return SVC_ENOMEM;
    case CURLE_WRITE_ERROR:
    case CURLE_FILESIZE_EXCEEDED:
        return SVC_ERANGE; /* the body passed max_response_bytes */
    default:
        /* Certificates, bad URLs, unsupported features: retrying cannot help. */
        return SVC_EINTERNAL;
    }
}

void rs_http__rs_path(const char *method, bool keyed, char out[20])
{
    static const char *const safe[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"};

    for (size_t i = 0; i < SVC_COUNTOF(safe); i++) {
        if (strcmp(method, safe[i]) == 0) {
            snprintf(out, 20, "/%s", method);
            return;
        }
    }
    /* RFC 9110: POST and PATCH are not idempotent; an Idempotency-Key makes
     * a repeat harmless at a receiver that dedupes by it. */
    if ((strcmp(method, "POST") == 0 || strcmp(method, "PATCH") == 0) && keyed)
        snprintf(out, 20, "/%s-keyed", method);
    else
        snprintf(out, 20, "/%.15s", method);
}

bool rs_http__has_idempotency_key(const char *const *headers, size_t n)
{
    static const char name[] = "Idempotency-Key:";

    for (size_t i = 0; i < n; i++) {
        const char *v;
        if (strncasecmp(headers[i], name, sizeof name - 1) != 0)
            continue;
        for (v = headers[i] + sizeof name - 1; *v == ' ' || *v == '\t'; v++)
            ;
        if (*v != '\0')
            return true;
    }
    return false;
}
