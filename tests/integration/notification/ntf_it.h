/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ntf_it.h - the notification test's world: a Kafka broker and a RabbitMQ
 * node of its own, the real notify-sink, and the real notification service
 * started on them with quick retry tiers (1, 2, 4 s) and a quick breaker.
 * Order events are produced to shopmicro.orders.v1 the way order's relay
 * does (CloudEvents binary mode, protobuf value). Helpers fail the test.
 */
#ifndef NTF_IT_H
#define NTF_IT_H

#include <stdbool.h>

#include "mq_it.h"
#include "relay_it.h"
#include "rs/http.h"
#include "support/spawn.h"

#define NTF_IT_BASE "it.notifications"
/* A rotation in progress: the service signs with the new key and the one
 * being retired; the sink still knows only the old one, so every delivery
 * it accepts shows that the service signed with each of its keys. */
#define NTF_IT_SECRET     "whsec_bnRmLWl0LXdlYmhvb2sta2V5LWJlaW5nLXJldGlyZWQ="
#define NTF_IT_SECRET_NEW "whsec_bnRmLWl0LXdlYmhvb2sta2V5LXRoZS1uZXctb25lISE="

typedef struct ntf_it {
    rly_it_kafka_t kafka;
    mq_it_node_t rabbit;
    spawn_proc_t *sink, *svc;
    int sink_port, admin_port;
    rs_http_client_t *http; /* the test's own client, for the sink's /control */
} ntf_it_t;

/* Everything up (0), or -1 with what failed printed. */
int ntf_it_up(ntf_it_t *w);
/* SIGTERM to the service (0 when it exited 0), the sink, both brokers removed. */
int ntf_it_down(ntf_it_t *w);

/* Starts the service (after a kill) and waits until its workers consume. */
void ntf_it_svc_start(ntf_it_t *w);

/* Produces one order event: type "confirmed", "cancelled" or "created", ce_id id. */
void ntf_it_produce(ntf_it_t *w, const char *type, const char *id);
/* POST /control?query to the sink (200 or the test fails). */
void ntf_it_control(ntf_it_t *w, const char *query);
/* How many deliveries of id the sink took (its "times": duplicates included); 0: none. */
int ntf_it_received(ntf_it_t *w, const char *id);
/* How many records the sink keeps for id - its effects, which must be 1 once delivered,
 * however many duplicates came - and, in *times, the deliveries of it. */
int ntf_it_recorded(ntf_it_t *w, const char *id, int *times);
/* Waits until the sink took id; false after timeout_ms (scaled). */
bool ntf_it_wait_received(ntf_it_t *w, const char *id, int timeout_ms);
/* The service's log has needle within timeout_ms (scaled); dumps it if not. */
void ntf_it_wait_log(ntf_it_t *w, const char *needle, int timeout_ms);
/* A sample's value on the service's /metrics (-1: absent). */
double ntf_it_metric(ntf_it_t *w, const char *name);
/* Runs the real notify-dlq with verb and arg (NULL: none) on this node and base; its exit
 * status, and its output (stdout+stderr) in out. */
int ntf_it_dlq(ntf_it_t *w, const char *verb, const char *arg, char *out, size_t cap);
/* Waits until that sample is at least min; fails the test after timeout_ms (scaled). */
void ntf_it_wait_metric(ntf_it_t *w, const char *name, double min, int timeout_ms);

#endif
