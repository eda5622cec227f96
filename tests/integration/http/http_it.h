/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_it.h - what both HTTP tests do: deadlines, the sink's /control, and a
 * signed webhook delivery through pkg/resilience's HTTP binding.
 */
#ifndef HTTP_IT_H
#define HTTP_IT_H

#include "rs/http.h"
#include "webhook/webhook.h"

/* The monotonic deadline ms from now; ms elapsed since t0 (svc_now_ns()). */
uint64_t hit_in_ms(uint64_t ms);
uint64_t hit_ms_since(uint64_t t0);

/* POST <control_url>?<query> through cl; fails the test unless 200. */
void hit_control(rs_http_client_t *cl, const char *control_url, const char *query);

/*
 * POSTs a small JSON body signed with key (webhook-id id, the current
 * time), with "Idempotency-Key: id" when keyed, within deadline_ms. Prints
 * the result. res->body is set when want_body (rs_http_result_dispose()).
 */
svc_err_t hit_deliver(rs_http_client_t *cl, const whk_key_t *key, const char *url, const char *id,
                      uint64_t deadline_ms, bool keyed, bool want_body, rs_http_result_t *res);

#endif
