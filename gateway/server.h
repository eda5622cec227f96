/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.h - the gateway's transport: one h2o event loop per thread, each
 * with its own SO_REUSEPORT listener, and the shutdown sequence.
 *
 * Second instance: SO_REUSEPORT would let a second gateway on the same
 * address silently share its traffic, so start-up first takes an exclusive
 * flock(2) on $GATEWAY_LOCK_DIR/shopmicro-gateway-<address>.lock (closes the
 * race of two gateways starting at once) and then probe-binds the address
 * without SO_REUSEPORT (catches any other listener, ours or not). Either
 * failing is a loud start-up error, exit status 1.
 *
 * Shutdown (SIGTERM/SIGINT, blocked in every thread by rpc_init): every
 * loop closes its listener, answers with Connection: close, closes idle
 * keep-alive connections, and waits for its in-flight requests; after
 * GATEWAY_DRAIN_MS it cancels the upstream calls still running (answered
 * 503). Then the loops, the upstream clients and h2o are torn down.
 *
 * Memory: until then the main thread checks once a second how many
 * connections have closed, and when many have it asks pkg/core's trimmer
 * (svc_mem_start, started by main) to give the freed heap back to the
 * kernel, off the loop threads; glibc would otherwise keep it resident
 * (server.c, "Freed memory").
 */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include "config.h"

/* Serves until SIGTERM/SIGINT. Call rpc_init() first. Returns the process
 * exit status: 0 after a clean shutdown, 1 when start-up failed or the
 * drain could not finish. */
int gw_server_run(const gw_config_t *cfg);

#endif
