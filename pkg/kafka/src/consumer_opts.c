/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer_opts.c - the pure parts of the consumer: its options (defaults,
 * validation), the verdict -> action table, the retry backoff, and the
 * dead letter's topic and headers. Nothing here touches librdkafka, so the
 * unit tests cover it without a broker.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kafka/consumer.h"
#include "rs/resilience.h"

const unsigned kfk_latency_bounds_ms[KFK_LATENCY_BUCKETS] = {1,   5,   10,  25,   50,
                                                             100, 250, 500, 1000, 5000};

void kfk_consumer_opts_init(kfk_consumer_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->client_id = KFK_DEFAULT_CLIENT_ID;
    o->session_timeout_ms = KFK_CONSUMER_DEFAULT_SESSION_TIMEOUT_MS;
    o->heartbeat_interval_ms = KFK_CONSUMER_DEFAULT_HEARTBEAT_INTERVAL_MS;
    o->max_poll_interval_ms = KFK_CONSUMER_DEFAULT_MAX_POLL_INTERVAL_MS;
    o->handler_timeout_ms = KFK_CONSUMER_DEFAULT_HANDLER_TIMEOUT_MS;
    o->backoff_base_ms = KFK_CONSUMER_DEFAULT_BACKOFF_BASE_MS;
    o->backoff_cap_ms = KFK_CONSUMER_DEFAULT_BACKOFF_CAP_MS;
    o->max_attempts = KFK_CONSUMER_DEFAULT_MAX_ATTEMPTS;
    o->dlq_timeout_ms = KFK_CONSUMER_DEFAULT_DLQ_TIMEOUT_MS;
    o->lag_interval_ms = KFK_CONSUMER_DEFAULT_LAG_INTERVAL_MS;
    o->batch_max = KFK_CONSUMER_DEFAULT_BATCH_MAX;
    o->commit_interval_ms = KFK_CONSUMER_DEFAULT_COMMIT_INTERVAL_MS;
}

static bool empty(const char *s)
{
    return s == NULL || s[0] == '\0';
}

static bool in_range(int v, int lo, int hi)
{
    return v >= lo && v <= hi;
}

/* The topics: present, non-empty, at most KFK_CONSUMER_MAX_TOPICS, and none
 * of them the dead-letter topic (a dead letter would be consumed again). */
static const char *bad_topics(const kfk_consumer_opts_t *o)
{
    size_t n = 0;

    if (o->topics == NULL || o->topics[0] == NULL)
        return "topics is required";
    for (; o->topics[n] != NULL; n++) {
        if (n == KFK_CONSUMER_MAX_TOPICS)
            return "topics: more than 16";
        if (o->topics[n][0] == '\0')
            return "topics: an empty name";
        if (o->dlq_topic != NULL && strcmp(o->topics[n], o->dlq_topic) == 0)
            return "dlq_topic must not be a consumed topic";
    }
    return NULL;
}

/* The broker refuses a JoinGroup whose id breaks its rules
 * (INVALID_GROUP_ID, or no answer a caller could act on): checked here so
 * that a bad name fails at start, with its name. */
static const char *bad_instance_id(const char *id)
{
    size_t n = 0;

    if (id == NULL)
        return NULL;
    for (; id[n] != '\0'; n++) {
        char ch = id[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return "group_instance_id: only [A-Za-z0-9._-]";
    }
    if (n == 0 || n > KFK_CONSUMER_INSTANCE_ID_MAX)
        return "group_instance_id must be NULL (dynamic membership) or 1..249 characters";
    if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return "group_instance_id must not be . or ..";
    return NULL;
}

static const char *bad_timing(const kfk_consumer_opts_t *o)
{
    if (!in_range(o->session_timeout_ms, 6000, 300000))
        return "session_timeout_ms must be 6000..300000";
    if (!in_range(o->heartbeat_interval_ms, 100, o->session_timeout_ms / 3))
        return "heartbeat_interval_ms must be 100..session_timeout_ms / 3";
    if (!in_range(o->handler_timeout_ms, 100, 600000))
        return "handler_timeout_ms must be 100..600000";
    if (!in_range(o->dlq_timeout_ms, 1000, 300000))
        return "dlq_timeout_ms must be 1000..300000";
    /* One kfk_consumer_poll takes at most two handler deadlines (a batch
     * shares one; after a failed batch, the one record tried alone gets its
     * own) and one dead letter's wait (after a failed one, the others of the
     * poll are not tried: consumer_loop.c). Two polls of them must fit in
     * the poll interval, or the group would evict a busy member. */
    if (!in_range(o->max_poll_interval_ms, 1, 3600000) ||
        (int64_t)o->max_poll_interval_ms <=
            2 * ((int64_t)o->handler_timeout_ms + o->dlq_timeout_ms))
        return "max_poll_interval_ms must exceed 2 x (handler_timeout_ms + dlq_timeout_ms), "
               "max 3600000";
    if (!in_range(o->backoff_base_ms, 1, 60000))
        return "backoff_base_ms must be 1..60000";
    if (!in_range(o->backoff_cap_ms, o->backoff_base_ms, 3600000))
        return "backoff_cap_ms must be backoff_base_ms..3600000";
    if (!in_range(o->lag_interval_ms, 100, 600000))
        return "lag_interval_ms must be 100..600000";
    if (!in_range(o->commit_interval_ms, 0, 60000))
        return "commit_interval_ms must be 0..60000";
    return NULL;
}

svc_err_t kfk_consumer_opts_validate(const kfk_consumer_opts_t *o,
                                     char errbuf[static SVC_ERRBUF_LEN])
{
    const char *bad = NULL;

    if (empty(o->brokers))
        bad = "brokers is required";
    else if (empty(o->group_id))
        bad = "group_id is required";
    else if (empty(o->client_id))
        bad = "client_id is required";
    else if (o->dlq_topic != NULL && o->dlq_topic[0] == '\0')
        bad = "dlq_topic must be NULL (the default) or a name";
    else if ((bad = bad_topics(o)) != NULL)
        ;
    else if ((bad = bad_instance_id(o->group_instance_id)) != NULL)
        ;
    else if ((bad = bad_timing(o)) != NULL)
        ;
    else if (o->handler == NULL)
        bad = "handler is required";
    else if (o->batch_max < 1 || o->batch_max > KFK_CONSUMER_MAX_BATCH)
        bad = "batch_max must be 1..1000";
    else if (o->batch != NULL &&
             (o->batch->begin == NULL || o->batch->commit == NULL || o->batch->rollback == NULL))
        bad = "batch needs begin, commit and rollback";
    if (bad == NULL)
        return SVC_OK;
    svc_errbuf_set(errbuf, "kafka consumer: %s", bad);
    return SVC_EINVAL;
}

kfk_action_t kfk_verdict_action(kfk_verdict_t v, unsigned attempt, unsigned max_attempts,
                                bool *exhausted)
{
    *exhausted = false;
    switch (v) {
    case KFK_HANDLED:
    case KFK_DUPLICATE:
        return KFK_ACT_COMMIT;
    case KFK_POISON:
        return KFK_ACT_DEAD_LETTER;
    case KFK_RETRY:
        break;
    }
    /* KFK_RETRY, or a value outside the enum: never skip the record. */
    if (max_attempts != 0 && attempt >= max_attempts) {
        *exhausted = true;
        return KFK_ACT_DEAD_LETTER;
    }
    return KFK_ACT_BACKOFF;
}

uint32_t kfk_backoff_ms(int base_ms, int cap_ms, unsigned attempt, uint64_t random)
{
    /* Equal jitter rather than the relay's full jitter: a record waits at
     * least half the window, so a database that is down is not hit again at
     * once, while records of several consumers still spread out. */
    return rs_backoff_ms(RS_JITTER_EQUAL, (uint32_t)base_ms, (uint32_t)cap_ms,
                         attempt > 0 ? attempt - 1 : 0, random);
}

bool kfk_dlq_topic(const char *dlq_topic, const char *topic, char *out, size_t len)
{
    int n = dlq_topic != NULL ? snprintf(out, len, "%s", dlq_topic)
                              : snprintf(out, len, "%s%s", topic, KFK_CONSUMER_DEFAULT_DLQ_SUFFIX);

    return n > 0 && (size_t)n < len;
}

static void put(kfk_header_t *out, size_t *n, const char *name, const char *value)
{
    out[*n].name = name;
    out[*n].value = value;
    out[*n].len = strlen(value);
    (*n)++;
}

static void format_time(int64_t unix_ms, char *out, size_t len)
{
    time_t s = (time_t)(unix_ms / 1000);
    struct tm tm;

    if (unix_ms < 0 || gmtime_r(&s, &tm) == NULL) {
        snprintf(out, len, "%s", "1970-01-01T00:00:00.000Z");
        return;
    }
    /* strftime, not one snprintf: gcc -O2 cannot bound tm's fields and
     * -Wformat-truncation (an error here) refuses the 32-byte buffer. */
    size_t k = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, len - k, ".%03dZ", (int)(unix_ms % 1000));
}

svc_err_t kfk_dlq_headers(const kfk_header_t *orig, size_t n_orig, const kfk_dlq_info_t *info,
                          kfk_dlq_text_t *text, kfk_header_t out[KFK_MAX_HEADERS], size_t *n,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    size_t room = KFK_MAX_HEADERS - KFK_DLQ_HEADERS, dropped = 0;

    *n = 0;
    if (empty(info->topic) || empty(info->group)) {
        svc_errbuf_set(errbuf, "dead letter: the original %s is required",
                       empty(info->topic) ? "topic" : "consumer group");
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < n_orig; i++) {
        /* A record dead-lettered before (and replayed) gets the new set
         * only: two dlq-reason headers would leave a reader guessing. */
        if (orig[i].name != NULL && strncmp(orig[i].name, "dlq-", 4) == 0)
            continue;
        if (*n == room) {
            dropped++;
            continue;
        }
        out[(*n)++] = orig[i];
    }
    snprintf(text->partition, sizeof text->partition, "%" PRId32, info->partition);
    snprintf(text->offset, sizeof text->offset, "%" PRId64, info->offset);
    format_time(info->time_unix_ms, text->time, sizeof text->time);
    put(out, n, KFK_DLQ_REASON, empty(info->reason) ? "unspecified" : info->reason);
    put(out, n, KFK_DLQ_ORIG_TOPIC, info->topic);
    put(out, n, KFK_DLQ_ORIG_PARTITION, text->partition);
    put(out, n, KFK_DLQ_ORIG_OFFSET, text->offset);
    put(out, n, KFK_DLQ_GROUP, info->group);
    put(out, n, KFK_DLQ_TIME, text->time);
    if (dropped > 0) {
        snprintf(text->dropped, sizeof text->dropped, "%zu", dropped);
        put(out, n, KFK_DLQ_DROPPED, text->dropped);
    }
    return SVC_OK;
}
