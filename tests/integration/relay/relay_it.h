/* SPDX-License-Identifier: Apache-2.0 */
/*
 * relay_it.h - what the relay's integration tests need besides order_it.h:
 * a real Kafka broker started by deploy/local/kafka.sh in a run folder of
 * the test's own on two free ports, the real relay binary, and a consumer
 * that reads a whole topic back with every record's key, headers and value.
 *
 * Environment (set by tests/integration/relay/CMakeLists.txt):
 *   RELAY_BIN                   the relay under test
 *   RELAY_IT_KAFKA_SH           deploy/local/kafka.sh
 *   RELAY_IT_STACK_DIR          deploy/local (stack.sh's free_ports picks the ports)
 *   RELAY_IT_RUN_DIR            the broker's run folder (emptied first)
 *   SHOPMICRO_KAFKA_LIB_CACHE   the jar cache, shared within the build tree
 */
#ifndef RELAY_IT_H
#define RELAY_IT_H

#include "kafka/kafka.h"
#include "order_it.h"

#define RLY_IT_TOPIC "shopmicro.orders.v1"

/* The broker. Zero-initialise. */
typedef struct rly_it_kafka {
    int port, controller_port;
    char brokers[32]; /* 127.0.0.1:<port> */
} rly_it_kafka_t;

/* kafka.sh VERB (start, stop, kill) with this broker's ports and run folder;
 * a fresh run folder and ports for "start" when k->port is 0. SVC_OK when it
 * exited 0 (its output is dumped otherwise). */
svc_err_t rly_it_kafka(rly_it_kafka_t *k, const char *verb);
/* Stops the broker (if running) and removes the run folder. */
void rly_it_kafka_cleanup(rly_it_kafka_t *k);

/* Starts the relay on db_dsn and the broker, with the test defaults
 * (quick poll, delivery timeout and backoff) then extra (NULL-terminated
 * "NAME=VALUE", may be NULL), and waits for its start line. */
svc_err_t rly_it_relay_start(const char *db_dsn, const rly_it_kafka_t *k, const char *const *extra,
                             spawn_proc_t **out);
/* SIGTERM; 0 when it exited 0 (its log is dumped otherwise). *published
 * (optional) gets the count its last log line reports. NULL-safe; clears *p. */
int rly_it_relay_stop(spawn_proc_t **p, long *published);

/* SIGKILL (a crash: no drain, the claim's transaction dies with the
 * session) and reap. NULL-safe; clears *p. */
void rly_it_relay_kill(spawn_proc_t **p);

/* The group set-up the relay tests share: a fresh broker (a run folder a
 * killed run left is removed first), the order fixture (ord_it_setup with
 * its own catalog) in *ord, and two products, Mug and Tea, in a and b.
 * 0, or -1 (what failed is printed). */
int rly_it_group_up(rly_it_kafka_t *k, ord_it_t **ord, char a[37], char b[37]);
/* Its tear-down, after the relay's: SIGTERM to *relay (rly_it_relay_stop),
 * ord_it_teardown, the broker removed. 0 when both exited cleanly. */
int rly_it_group_down(rly_it_kafka_t *k, ord_it_t **ord, spawn_proc_t **relay);

/* GET path on 127.0.0.1:port (the relay's admin port): the status (-1 when
 * it could not be read), the body in out. */
int rly_it_http_get(int port, const char *path, char *out, size_t cap);
/* The value of the unlabelled sample `name` on a /metrics page; -1 absent. */
double rly_it_metric(const char *page, const char *name);

/* Produces one record to topic through librdkafka (acks=all) and waits up
 * to timeout_ms for its acknowledgement: SVC_OK, or why not (printed).
 * headers: n "name", value, len triples as kfk_header_t. */
svc_err_t rly_it_produce(const rly_it_kafka_t *k, const char *topic, const void *key,
                         size_t key_len, const void *value, size_t len, const kfk_header_t *headers,
                         size_t n_headers, int timeout_ms);

/* One record of the topic, as consumed. Header values are "" when absent. */
typedef struct rly_it_record {
    char key[64];
    int32_t partition;
    int64_t offset;
    char specversion[16], id[64], type[64], source[64], time[40], content_type[64], request_id[64];
    char dlq_reason[256]; /* a dead letter's dlq-reason */
    uint8_t *value;       /* owned by the record array */
    size_t value_len;
} rly_it_record_t;

/* Reads the topic from the beginning to the end of every partition (within
 * timeout_ms). *out (n records; within a partition in offset order) is owned by
 * caller: rly_it_records_free. */
svc_err_t rly_it_consume(const rly_it_kafka_t *k, int timeout_ms, rly_it_record_t **out, size_t *n);
/* The same for any topic (a dead-letter topic, shopmicro.inventory.v1). */
svc_err_t rly_it_consume_topic(const rly_it_kafka_t *k, const char *topic, int timeout_ms,
                               rly_it_record_t **out, size_t *n);
void rly_it_records_free(rly_it_record_t *r, size_t n);

#endif
