/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kfk_it_consumer.c - a consumer process for test_kfk_consumer's crash case.
 *
 * Its handler "commits its effect" the way a service's transaction would:
 * it appends the record's ce_id to a file and fdatasyncs it, then says
 * KFK_HANDLED. With KFK_IT_HANG_AT=N, after recording the Nth record it
 * prints "hanging at <ce_id>" and waits in the handler, so that the test can
 * kill -9 it between the effect and the offset commit. SIGTERM: stops,
 * closes (commits, leaves the group) and exits 0.
 *
 * Environment: KFK_IT_BROKERS, KFK_IT_TOPIC, KFK_IT_GROUP, KFK_IT_OUT (the
 * file), KFK_IT_HANG_AT (optional).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kafka/consumer.h"

static kfk_consumer_t *consumer;
static int out_fd = -1;
static long hang_at, handled;

static void on_term(int sig)
{
    (void)sig;
    if (consumer != NULL)
        kfk_consumer_stop(consumer);
}

static kfk_verdict_t handle(void *ctx, const kfk_record_t *r, char *reason)
{
    char line[160];
    int n = snprintf(line, sizeof line, "%s\n", r->ce_id != NULL ? r->ce_id : "-");

    if (write(out_fd, line, (size_t)n) != n || fdatasync(out_fd) != 0) {
        snprintf(reason, KFK_REASON_LEN, "cannot record %s", line);
        return KFK_RETRY;
    }
    if (++handled == hang_at) {
        printf("hanging at %s\n", r->ce_id != NULL ? r->ce_id : "-");
        fflush(stdout);
        while (!kfk_record_cancelled(r))
            usleep(10000);
    }
    return KFK_HANDLED;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);

    if (v == NULL || v[0] == '\0') {
        fprintf(stderr, "%s is not set\n", name);
        exit(2);
    }
    return v;
}

int main(void)
{
    const char *topics[] = {env("KFK_IT_TOPIC"), NULL};
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_consumer_opts_t o;
    bool assigned = false;

    hang_at = getenv("KFK_IT_HANG_AT") != NULL ? strtol(getenv("KFK_IT_HANG_AT"), NULL, 10) : 0;
    out_fd = open(env("KFK_IT_OUT"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out_fd < 0) {
        perror("open KFK_IT_OUT");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    kfk_consumer_opts_init(&o);
    o.brokers = env("KFK_IT_BROKERS");
    o.group_id = env("KFK_IT_GROUP");
    o.topics = topics;
    o.session_timeout_ms = 6000; /* the broker's minimum: a dead member goes soon */
    o.handler_timeout_ms = 60000;
    o.dlq_timeout_ms = 2000;
    o.max_poll_interval_ms = 130000;
    o.lag_interval_ms = 200;
    o.handler = handle;
    if (kfk_consumer_new(&o, &consumer, errbuf) != SVC_OK) {
        fprintf(stderr, "kfk_consumer_new: %s\n", errbuf);
        return 1;
    }
    for (;;) {
        kfk_consumer_stats_t s;
        svc_err_t err = kfk_consumer_poll(consumer, 100, NULL, errbuf);
        if (err == SVC_ECANCELLED)
            break;
        kfk_consumer_stats(consumer, &s);
        if (!assigned && s.n_partitions > 0) {
            assigned = true;
            printf("assigned %u partitions\n", s.n_partitions);
            fflush(stdout);
        }
    }
    if (kfk_consumer_close(consumer, errbuf) != SVC_OK)
        fprintf(stderr, "close: %s\n", errbuf);
    kfk_consumer_free(consumer);
    close(out_fd);
    printf("stopped: handled=%ld\n", handled);
    return 0;
}
