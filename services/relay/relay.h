/* SPDX-License-Identifier: Apache-2.0 */
/*
 * relay.h - the outbox relay's loop: claim a batch of unpublished rows
 * (store.h), publish each as a CloudEvent (pkg/kafka), wait for every
 * delivery report, mark published only the rows the broker acknowledged,
 * commit; sleep until a NOTIFY (listen.h) or the slow poll; back off with
 * jitter while Kafka or the database fails.
 */
#ifndef RLY_RELAY_H
#define RLY_RELAY_H

#include "config.h"

typedef struct rly_relay rly_relay_t;

/* Builds the producer, the store connection and the listener (none of them
 * connects yet). *out owned by caller. cfg is borrowed; must outlive it. */
svc_err_t rly_relay_new(const rly_config_t *cfg, rly_relay_t **out,
                        char errbuf[static SVC_ERRBUF_LEN]);
/* Waits up to RELAY_DRAIN_MS for messages still in flight, then frees. */
void rly_relay_free(rly_relay_t *r);

/* Relays until stop_fd (a signalfd) becomes readable, then lets the batch
 * in flight finish within RELAY_DRAIN_MS. Returns the exit status (0). */
int rly_relay_run(rly_relay_t *r, int stop_fd);

#endif
