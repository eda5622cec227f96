/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kfk_it_batch.c - the batch cases of test_kfk_consumer (kfk_it_batch.h):
 * a consumer with batch_max > 1 and batch ops whose "transaction" is kept
 * in memory the way a database keeps one: the handler stages its effect,
 * commit makes the staged effects the committed ones, rollback drops them.
 * So the cases can tell an effect that was committed from one that was
 * only handed to the handler:
 *   - records that wait are handled many to a transaction, each committed
 *     exactly once, in offset order per partition; the offsets are
 *     committed (a new member gets nothing);
 *   - a KFK_RETRY in the middle of a batch rolls the batch back; its
 *     records are handed again alone, the failing one is retried, and every
 *     effect is still committed once and in order;
 *   - a poison record in a batch is dead-lettered and the rest committed;
 *   - a failed commit hands the whole batch again: nothing is lost or
 *     committed twice;
 *   - with commit_interval_ms the offsets reach the group in the
 *     background, while the consumer is still open.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfk_it_batch.h"

#define TX_MAX 512

typedef struct effect {
    char id[64];
    int32_t partition;
    int64_t offset;
} effect_t;

typedef struct tx_ctx {
    effect_t staged[TX_MAX], committed[TX_MAX];
    size_t n_staged, n_committed;
    unsigned begins, commits, rollbacks, calls;
    size_t in_tx, biggest; /* handler calls in the open transaction, and the most */
    char retry_id[64];     /* answers KFK_RETRY on its first retry_fails attempts */
    unsigned retry_fails;
    bool fail_next_commit;
} tx_ctx_t;

static bool has(const effect_t *e, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].id, id) == 0)
            return true;
    return false;
}

static kfk_verdict_t tx_handler(void *ctx, const kfk_record_t *r, char *reason)
{
    tx_ctx_t *t = ctx;
    const char *id = r->ce_id != NULL ? r->ce_id : "";
    effect_t *e;

    t->calls++;
    if (t->begins == t->commits + t->rollbacks)
        fail_msg("handler called outside a transaction (%s)", id);
    if (++t->in_tx > t->biggest)
        t->biggest = t->in_tx;
    if (r->value_len == 6 && memcmp(r->value, "poison", 6) == 0) {
        snprintf(reason, KFK_REASON_LEN, "undecodable: test poison");
        return KFK_POISON;
    }
    if (strcmp(id, t->retry_id) == 0 && r->attempt <= t->retry_fails) {
        snprintf(reason, KFK_REASON_LEN, "database unavailable (test)");
        return KFK_RETRY;
    }
    if (has(t->committed, t->n_committed, id) || has(t->staged, t->n_staged, id))
        return KFK_DUPLICATE;
    if (t->n_staged == TX_MAX)
        fail_msg("too many effects in one transaction");
    e = &t->staged[t->n_staged++];
    snprintf(e->id, sizeof e->id, "%s", id);
    e->partition = r->partition;
    e->offset = r->offset;
    return KFK_HANDLED;
}

static svc_err_t tx_begin(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    tx_ctx_t *t = ctx;

    (void)deadline_ms, (void)errbuf;
    if (t->begins != t->commits + t->rollbacks)
        fail_msg("begin inside an open transaction");
    t->begins++;
    t->n_staged = 0;
    t->in_tx = 0;
    return SVC_OK;
}

static svc_err_t tx_commit(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    tx_ctx_t *t = ctx;

    (void)deadline_ms;
    if (t->fail_next_commit) {
        t->fail_next_commit = false;
        svc_errbuf_set(errbuf, "commit failed (test)");
        return SVC_EUNAVAIL; /* the consumer rolls back next */
    }
    if (t->n_committed + t->n_staged > TX_MAX)
        fail_msg("too many effects");
    memcpy(&t->committed[t->n_committed], t->staged, t->n_staged * sizeof t->staged[0]);
    t->n_committed += t->n_staged;
    t->n_staged = 0;
    t->commits++;
    return SVC_OK;
}

static void tx_rollback(void *ctx)
{
    tx_ctx_t *t = ctx;

    t->n_staged = 0;
    t->rollbacks++;
}

static const kfk_batch_ops_t tx_ops = {tx_begin, tx_commit, tx_rollback};

static kfk_consumer_t *batch_consumer_every(const kit_fixture_t *f, const char *topic,
                                            const char *group, tx_ctx_t *t, unsigned batch_max,
                                            int commit_interval_ms)
{
    const char *topics[] = {topic, NULL};
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_consumer_opts_t o;
    kfk_consumer_t *c = NULL;

    kfk_consumer_opts_init(&o);
    o.brokers = f->kafka.brokers;
    o.group_id = group;
    o.topics = topics;
    o.session_timeout_ms = 6000;
    o.handler_timeout_ms = 5000;
    o.dlq_timeout_ms = 5000;
    o.max_poll_interval_ms = 25000;
    o.backoff_base_ms = 100;
    o.backoff_cap_ms = 400;
    o.batch_max = batch_max;
    o.commit_interval_ms = commit_interval_ms;
    o.batch = &tx_ops;
    o.handler = tx_handler;
    o.ctx = t;
    if (kfk_consumer_new(&o, &c, errbuf) != SVC_OK)
        fail_msg("kfk_consumer_new: %s", errbuf);
    return c;
}

static kfk_consumer_t *batch_consumer(const kit_fixture_t *f, const char *topic, const char *group,
                                      tx_ctx_t *t, unsigned batch_max)
{
    return batch_consumer_every(f, topic, group, t, batch_max, 0);
}

/* Polls until n effects are committed (or fails after timeout_ms). */
static void drive_committed(kfk_consumer_t *c, tx_ctx_t *t, size_t n, int timeout_ms)
{
    char errbuf[SVC_ERRBUF_LEN];
    uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(timeout_ms);

    while (t->n_committed < n && svc_now_ms() < give_up)
        (void)kfk_consumer_poll(c, 100, NULL, errbuf);
    if (t->n_committed < n)
        fail_msg("%zu effects committed, not %zu, within %d ms", t->n_committed, n, timeout_ms);
    kit_drive_for(c, 300); /* anything more (wrong) would come now */
}

/* Each of prefix-0 .. prefix-(n-1) committed once, and per partition in
 * offset order. */
static void assert_each_once_in_order(const tx_ctx_t *t, const char *prefix, int n)
{
    char id[64];

    assert_int_equal(t->n_committed, (size_t)n);
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        if (!has(t->committed, t->n_committed, id))
            fail_msg("%s was never committed", id);
    }
    for (size_t i = 0; i < t->n_committed; i++)
        for (size_t k = i + 1; k < t->n_committed; k++)
            if (t->committed[k].partition == t->committed[i].partition &&
                t->committed[k].offset <= t->committed[i].offset)
                fail_msg("%s (offset %lld) committed after %s (offset %lld)", t->committed[k].id,
                         (long long)t->committed[k].offset, t->committed[i].id,
                         (long long)t->committed[i].offset);
}

void kit_batch_many_to_a_transaction(void **state)
{
    kit_fixture_t *f = *state;
    tx_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    kfk_consumer_t *c;

    kit_create_topic(f, "kfk-it.batch", 3);
    kit_produce(f, "kfk-it.batch", "b", 300, NULL, -1);
    c = batch_consumer(f, "kfk-it.batch", "it-batch", t, 50);
    drive_committed(c, t, 300, 30000);
    kfk_consumer_stats(c, &s);
    fprintf(stderr, "[kfk] batch: 300 records in %u transactions (largest %zu), %llu polls\n",
            t->commits, t->biggest, (unsigned long long)s.batches);
    assert_each_once_in_order(t, "b", 300);
    assert_int_equal(t->calls, 300);
    assert_int_equal(t->rollbacks, 0);
    assert_true(t->biggest > 1 && t->biggest <= 50);
    assert_true(t->commits < 300);
    assert_int_equal(s.consumed, 300);
    assert_int_equal(s.handled, 300);
    assert_true(s.batches < 300);
    kit_close_free(c);
    kit_group_has_nothing_left(f, "kfk-it.batch", "it-batch", 3);
    free(t);
}

void kit_batch_retry_rolls_back_and_splits(void **state)
{
    kit_fixture_t *f = *state;
    tx_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    kfk_consumer_t *c;

    kit_create_topic(f, "kfk-it.batch-retry", 1);
    kit_produce(f, "kfk-it.batch-retry", "r", 40, NULL, -1);
    snprintf(t->retry_id, sizeof t->retry_id, "r-17");
    t->retry_fails = 2;
    c = batch_consumer(f, "kfk-it.batch-retry", "it-batch-retry", t, 100);
    drive_committed(c, t, 40, 30000);
    kfk_consumer_stats(c, &s);
    fprintf(stderr,
            "[kfk] batch retry: %u commits, %u rollbacks, %u handler calls, %llu "
            "retries\n",
            t->commits, t->rollbacks, t->calls, (unsigned long long)s.retries);
    assert_each_once_in_order(t, "r", 40);
    assert_true(t->rollbacks >= 1); /* the batch with r-17, and r-17 alone */
    assert_int_equal(s.retries, 2);
    assert_int_equal(s.dead_lettered, 0);
    kit_close_free(c);
    free(t);
}

void kit_batch_poison_is_dead_lettered(void **state)
{
    kit_fixture_t *f = *state;
    tx_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    kit_dead_t d;
    kfk_consumer_t *c;

    kit_create_topic(f, "kfk-it.batch-poison", 1);
    kit_create_topic(f, "kfk-it.batch-poison.dlq", 1);
    kit_produce(f, "kfk-it.batch-poison", "q", 20, NULL, 5);
    c = batch_consumer(f, "kfk-it.batch-poison", "it-batch-poison", t, 100);
    drive_committed(c, t, 19, 30000);
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.dead_lettered, 1);
    assert_int_equal(s.retries, 0);
    assert_false(has(t->committed, t->n_committed, "q-5"));
    assert_int_equal(t->n_committed, 19);
    kit_close_free(c);
    kit_read_dead_letters(f, "kfk-it.batch-poison.dlq", &d);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.ce_id, "q-5");
    assert_string_equal(d.reason, "undecodable: test poison");
    free(t);
}

void kit_batch_failed_commit_hands_it_again(void **state)
{
    kit_fixture_t *f = *state;
    tx_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_t *c;

    kit_create_topic(f, "kfk-it.batch-commit", 3);
    kit_produce(f, "kfk-it.batch-commit", "m", 90, NULL, -1);
    t->fail_next_commit = true;
    c = batch_consumer(f, "kfk-it.batch-commit", "it-batch-commit", t, 100);
    drive_committed(c, t, 90, 30000);
    assert_each_once_in_order(t, "m", 90);
    assert_true(t->rollbacks >= 1);
    assert_false(t->fail_next_commit);
    kit_close_free(c);
    kit_group_has_nothing_left(f, "kfk-it.batch-commit", "it-batch-commit", 3);
    free(t);
}

void kit_batch_interval_commits_in_the_background(void **state)
{
    kit_fixture_t *f = *state;
    tx_ctx_t *t = calloc(1, sizeof *t);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_t *peer;
    kfk_consumer_t *c;

    kit_create_topic(f, "kfk-it.batch-interval", 1);
    kit_produce(f, "kfk-it.batch-interval", "i", 30, NULL, -1);
    c = batch_consumer_every(f, "kfk-it.batch-interval", "it-batch-interval", t, 100, 200);
    drive_committed(c, t, 30, 30000);
    kit_drive_for(c, 800); /* a few intervals: the asynchronous commits go out */
    peer = kit_client(f, RD_KAFKA_CONSUMER, "it-batch-interval");
    rd_kafka_topic_partition_list_add(l, "kfk-it.batch-interval", 0);
    assert_int_equal(rd_kafka_committed(peer, l, it_ms(10000)), RD_KAFKA_RESP_ERR_NO_ERROR);
    fprintf(stderr, "[kfk] interval commits: the group's offset is %lld with the consumer open\n",
            (long long)l->elems[0].offset);
    assert_int_equal(l->elems[0].offset, 30);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(peer);
    assert_each_once_in_order(t, "i", 30);
    kit_close_free(c);
    free(t);
}
