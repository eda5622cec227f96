/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kfk_it.h - what test_kfk_consumer needs besides relay_it.h's broker: its
 * topics (made with the admin API), records with CloudEvents headers, and
 * consumers in the test's process whose handler records every call and
 * answers as the case asks (poison values, a record that fails K times).
 * The helpers fail the cmocka test themselves.
 */
#ifndef KFK_IT_H
#define KFK_IT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "kafka/consumer.h"
#include "relay_it.h"

#define KIT_MAX_SEEN 256

typedef struct kit_fixture {
    rly_it_kafka_t kafka;
} kit_fixture_t;

/* What the handler saw, call by call. */
typedef struct kit_seen {
    char id[64], value[32];
    int32_t partition;
    int64_t offset;
    unsigned attempt;
    kfk_verdict_t verdict;
} kit_seen_t;

typedef struct kit_ctx {
    kit_seen_t seen[KIT_MAX_SEEN];
    size_t n;
    char retry_id[64];          /* the record that gets KFK_RETRY ...            */
    unsigned retry_fails;       /* ... this many times (0: none)                 */
    uint64_t first_ns, last_ns; /* the first and the last handler call     */
    const char *dlq_topic;      /* options of kit_consumer: NULL, 0: the    */
    int dlq_timeout_ms;         /* default topic, 5000                      */
} kit_ctx_t;

/* The dead letter, as read back from the dead-letter topic. */
typedef struct kit_dead {
    char key[64], value[32], ce_id[64], x_test[16], reason[128], topic[64], partition[16],
        offset[24], group[64], time[40];
    size_t n;
} kit_dead_t;

/* A client of the broker: a producer, or a consumer of group (no commits,
 * partition EOF reported). Fails the test when it cannot be made. */
rd_kafka_t *kit_client(const kit_fixture_t *f, rd_kafka_type_t type, const char *group);
/* Creates every topic the cases use, or one (an existing one is fine). */
void kit_create_topics(const kit_fixture_t *f);
void kit_create_topic(const kit_fixture_t *f, const char *name, int parts);
/* n records to topic, acknowledged: ce_id <prefix>-<i>, key `key` (NULL: the
 * ce_id), value "v" or "poison" for index poison_at, header x-test: kept. */
void kit_produce(const kit_fixture_t *f, const char *topic, const char *prefix, int n,
                 const char *key, int poison_at);
/* A member of group on topic whose handler records into t (the test's
 * quick timings: 6 s session, backoff 100-400 ms, lag every 200 ms). */
kfk_consumer_t *kit_consumer(const kit_fixture_t *f, const char *topic, const char *group,
                             kit_ctx_t *t);
/* Polls until the handler was called `calls` times; fails after timeout_ms. */
void kit_drive(kfk_consumer_t *c, kit_ctx_t *t, size_t calls, int timeout_ms);
/* Polls for ms, whatever comes; kit_drive_two polls a (may be NULL) and b in turn. */
void kit_drive_for(kfk_consumer_t *c, int ms);
void kit_drive_two(kfk_consumer_t *a, kfk_consumer_t *b, int ms);
/* Polls until the group assigned `parts` partitions to c. */
void kit_wait_assigned(kfk_consumer_t *c, unsigned parts);
/* kfk_consumer_close (must succeed), then kfk_consumer_free. */
void kit_close_free(kfk_consumer_t *c);
/* A new member of group, after the others closed, gets nothing. */
void kit_group_has_nothing_left(const kit_fixture_t *f, const char *topic, const char *group,
                                unsigned parts);
/* Handler calls for id with verdict v; all KFK_HANDLED calls. */
size_t kit_count_verdict(const kit_ctx_t *t, const char *id, kfk_verdict_t v);
size_t kit_handled_count(const kit_ctx_t *t);
/* The first record of partition 0 of topic (and how many there are). */
void kit_read_dead_letters(const kit_fixture_t *f, const char *topic, kit_dead_t *d);

#endif
