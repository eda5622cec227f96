/* SPDX-License-Identifier: Apache-2.0 */
/* http_it.c - the helpers of http_it.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "http_it.h"

uint64_t hit_in_ms(uint64_t ms)
{
    return svc_now_ns() + ms * SVC_NS_PER_MS;
}

uint64_t hit_ms_since(uint64_t t0)
{
    return (svc_now_ns() - t0) / SVC_NS_PER_MS;
}

void hit_control(rs_http_client_t *cl, const char *control_url, const char *query)
{
    char url[256];
    rs_http_request_t r = {.method = "POST", .url = url, .deadline_ns = hit_in_ms(5000)};
    rs_http_result_t res;

    snprintf(url, sizeof url, "%s?%s", control_url, query);
    assert_int_equal(rs_http_do(cl, &r, &res), SVC_OK);
}

svc_err_t hit_deliver(rs_http_client_t *cl, const whk_key_t *key, const char *url, const char *id,
                      uint64_t deadline_ms, bool keyed, bool want_body, rs_http_result_t *res)
{
    static const char body[] = "{\"type\":\"OrderConfirmed\",\"order\":\"o-1\"}";
    char idem[sizeof "Idempotency-Key: " + WHK_ID_MAX];
    whk_headers_t h;
    const char *headers[4] = {h.id, h.timestamp, h.signature, idem};
    rs_http_request_t r = {.method = "POST",
                           .url = url,
                           .body = body,
                           .body_len = strlen(body),
                           .headers = headers,
                           .n_headers = keyed ? 4 : 3,
                           .deadline_ns = hit_in_ms(deadline_ms),
                           .want_body = want_body};
    svc_err_t err;

    snprintf(idem, sizeof idem, "Idempotency-Key: %s", id);
    assert_int_equal(whk_headers_make(key, id, (int64_t)time(NULL), body, strlen(body), &h),
                     SVC_OK);
    err = rs_http_do(cl, &r, res);
    print_message("%s: err=%s status=%d reason=%s attempts=%u message=%s body=%s\n", id,
                  svc_err_name(res->err), res->status, rs_reason_name(res->reason), res->attempts,
                  res->message, res->body != NULL ? res->body : "");
    return err;
}
