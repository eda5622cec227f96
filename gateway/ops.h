/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops.h - the operations endpoints, as local routes of the route table.
 *
 *   /healthz  200 {"status":"ok"} while the process serves HTTP.
 *   /readyz   each upstream's breaker state and channel connectivity; 503
 *             when a breaker is open, a channel is in transient failure, or
 *             the gateway is draining.
 *   /metrics  Prometheus text: the gateway's HTTP series and
 *             rs_metrics_render() of every upstream.
 *
 * All run on a loop thread and only read atomics: none blocks.
 */
#ifndef GW_OPS_H
#define GW_OPS_H

#include "routes.h"

void gw_ops_healthz(struct gw_app *app, struct st_h2o_mem_pool_t *pool, gw_reply_t *out);
void gw_ops_readyz(struct gw_app *app, struct st_h2o_mem_pool_t *pool, gw_reply_t *out);
void gw_ops_metrics(struct gw_app *app, struct st_h2o_mem_pool_t *pool, gw_reply_t *out);

#endif
