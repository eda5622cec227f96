/* SPDX-License-Identifier: Apache-2.0 */
/* relay_it.c - the broker, the relay binary and a topic reader for tests (relay_it.h). */
#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "relay_it.h"

#define ENV_MAX 32
/* kafka.sh's own start timeout is 90 s; a loaded machine may need most. */
#define KAFKA_VERB_MS 150000

static const char *need_env(const char *name)
{
    const char *v = getenv(name);

    if (v == NULL || v[0] == '\0') {
        fprintf(stderr, "%s is not set: run this test through ctest\n", name);
        exit(2);
    }
    return v;
}

static svc_err_t run(const char *const *argv, const char *const *env, int timeout_ms)
{
    char errbuf[SVC_ERRBUF_LEN] = "", log[512], st[64];
    spawn_opts_t o;
    int wstatus = -1;
    svc_err_t err;

    spawn_opts_init(&o);
    o.path = argv[0];
    o.argv = argv;
    o.env = env;
    spawn_log_path_make("kafka.sh", log, sizeof log);
    o.log_path = log;
    err = spawn_run(&o, timeout_ms, &wstatus, errbuf);
    if (err == SVC_OK && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
        return SVC_OK;
    spawn_status_text(wstatus, st, sizeof st);
    fprintf(stderr, "%s %s: %s %s (output in %s)\n", argv[1], argv[2],
            err == SVC_OK ? st : svc_err_name(err), errbuf, log);
    return err == SVC_OK ? SVC_EINTERNAL : err;
}

/* Two free ports below the ephemeral range, from the stack's own free_ports
 * (as tests/deploy does): a port the kernel hands out for outgoing
 * connections could be taken in the seconds before the broker binds it.
 * Falls back to two ports the kernel picks. */
static void pick_ports(rly_it_kafka_t *k)
{
    char cmd[1024];
    FILE *f;

    snprintf(cmd, sizeof cmd,
             "bash -c 'source \"$1\" >/dev/null 2>&1 && free_ports 2 9092 9093 19092 19093' "
             "_ %s/stack.sh 2>/dev/null",
             need_env("RELAY_IT_STACK_DIR"));
    f = popen(cmd, "r");
    if (f == NULL || fscanf(f, "%d %d", &k->port, &k->controller_port) != 2 || k->port <= 0 ||
        k->controller_port <= 0 || k->port == k->controller_port) {
        k->port = spawn_free_port();
        do
            k->controller_port = spawn_free_port();
        while (k->controller_port == k->port);
    }
    if (f != NULL)
        pclose(f);
}

svc_err_t rly_it_kafka(rly_it_kafka_t *k, const char *verb)
{
    char run_dir[600], port[64], cport[64];
    const char *env[] = {run_dir, port, cport, NULL};
    const char *argv[] = {"/bin/bash", need_env("RELAY_IT_KAFKA_SH"), verb, NULL};

    if (k->port == 0) {
        pick_ports(k);
        snprintf(k->brokers, sizeof k->brokers, "127.0.0.1:%d", k->port);
    }
    snprintf(run_dir, sizeof run_dir, "SHOPMICRO_RUN_DIR=%s", need_env("RELAY_IT_RUN_DIR"));
    snprintf(port, sizeof port, "SHOPMICRO_KAFKA_PORT=%d", k->port);
    snprintf(cport, sizeof cport, "SHOPMICRO_KAFKA_CONTROLLER_PORT=%d", k->controller_port);
    return run(argv, env, it_ms(KAFKA_VERB_MS));
}

void rly_it_kafka_cleanup(rly_it_kafka_t *k)
{
    const char *argv[] = {"/bin/rm", "-rf", "--", need_env("RELAY_IT_RUN_DIR"), NULL};

    if (k->port != 0)
        (void)rly_it_kafka(k, "stop");
    (void)run(argv, NULL, 30000);
}

svc_err_t rly_it_relay_start(const char *db_dsn, const rly_it_kafka_t *k, const char *const *extra,
                             spawn_proc_t **out)
{
    char dsn[PGTEST_DSN_MAX + 32], brokers[64], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[ENV_MAX] = {dsn, brokers, "RELAY_LOG_LEVEL=info",
                                /* quick: the tests wait on these; a slow poll, so
                                 * that only a NOTIFY wakes the relay quickly */
                                "RELAY_POLL_INTERVAL_MS=60000",
                                "RELAY_KAFKA_DELIVERY_TIMEOUT_MS=3000", "RELAY_BACKOFF_BASE_MS=100",
                                "RELAY_BACKOFF_CAP_MS=1000"};
    size_t n = 7;
    spawn_opts_t o;
    svc_err_t err;

    bool admin = false;

    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < ENV_MAX - 2; i++) {
        admin |= strncmp(extra[i], "RELAY_ADMIN_LISTEN=", 19) == 0;
        env[n++] = extra[i];
    }
    /* Off unless asked for: several relays run at once, and the default
     * port may be taken on this machine. */
    if (!admin)
        env[n++] = "RELAY_ADMIN_LISTEN=0";
    env[n] = NULL;
    snprintf(dsn, sizeof dsn, "RELAY_DB_DSN=%s", db_dsn);
    snprintf(brokers, sizeof brokers, "RELAY_KAFKA_BROKERS=%s", k->brokers);
    spawn_opts_init(&o);
    o.path = need_env("RELAY_BIN");
    o.env = env;
    err = spawn_start(&o, out, errbuf);
    if (err != SVC_OK) {
        fprintf(stderr, "cannot start the relay: %s\n", errbuf);
        return err;
    }
    err = spawn_log_wait(*out, "relaying the outbox", it_ms(10000));
    if (err != SVC_OK) {
        spawn_log_dump(*out, 40);
        spawn_free(*out);
        *out = NULL;
    }
    return err;
}

int rly_it_relay_stop(spawn_proc_t **p, long *published)
{
    char st[64], *log, *at;
    int wstatus = -1, rc = 0;

    if (*p == NULL)
        return 0;
    spawn_signal(*p, SIGTERM);
    if (spawn_wait_exit(*p, it_ms(20000), &wstatus) != SVC_OK || !WIFEXITED(wstatus) ||
        WEXITSTATUS(wstatus) != 0) {
        spawn_status_text(wstatus, st, sizeof st);
        fprintf(stderr, "relay did not exit 0 after SIGTERM (%s)\n", st);
        spawn_log_dump(*p, 60);
        rc = -1;
    }
    log = spawn_log_read(*p);
    at = log != NULL ? strstr(log, "stopped: published=") : NULL;
    if (published != NULL)
        *published = at != NULL ? strtol(at + strlen("stopped: published="), NULL, 10) : -1;
    free(log);
    spawn_free(*p);
    *p = NULL;
    return rc;
}

void rly_it_relay_kill(spawn_proc_t **p)
{
    if (*p == NULL)
        return;
    spawn_signal(*p, SIGKILL);
    (void)spawn_wait_exit(*p, it_ms(5000), NULL);
    spawn_free(*p);
    *p = NULL;
}

static void header(rd_kafka_headers_t *h, const char *name, char *out, size_t len)
{
    const void *v = NULL;
    size_t n = 0;

    out[0] = '\0';
    if (h != NULL && rd_kafka_header_get_last(h, name, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR)
        snprintf(out, len, "%.*s", (int)n, (const char *)v);
}

static svc_err_t keep(const rd_kafka_message_t *m, rly_it_record_t **recs, size_t *n, size_t *cap)
{
    rd_kafka_headers_t *h = NULL;
    rly_it_record_t *r;

    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        rly_it_record_t *g = realloc(*recs, c * sizeof *g);
        if (g == NULL)
            return SVC_ENOMEM;
        *recs = g, *cap = c;
    }
    r = &(*recs)[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%.*s", (int)m->key_len, (const char *)m->key);
    r->partition = m->partition;
    r->offset = m->offset;
    (void)rd_kafka_message_headers(m, &h);
    header(h, "ce_specversion", r->specversion, sizeof r->specversion);
    header(h, "ce_id", r->id, sizeof r->id);
    header(h, "ce_type", r->type, sizeof r->type);
    header(h, "ce_source", r->source, sizeof r->source);
    header(h, "ce_time", r->time, sizeof r->time);
    header(h, "content-type", r->content_type, sizeof r->content_type);
    header(h, "x-request-id", r->request_id, sizeof r->request_id);
    header(h, "dlq-reason", r->dlq_reason, sizeof r->dlq_reason);
    r->value = malloc(m->len + 1);
    if (r->value == NULL)
        return SVC_ENOMEM;
    if (m->len > 0) /* an empty record's payload is NULL: memcpy must not see it */
        memcpy(r->value, m->payload, m->len);
    r->value_len = m->len;
    return SVC_OK;
}

static rd_kafka_t *consumer_new(const rly_it_kafka_t *k)
{
    char why[256], group[64];
    rd_kafka_conf_t *c = rd_kafka_conf_new();

    snprintf(group, sizeof group, "relay-it-%d", (int)getpid());
    if (rd_kafka_conf_set(c, "bootstrap.servers", k->brokers, why, sizeof why) ||
        rd_kafka_conf_set(c, "group.id", group, why, sizeof why) ||
        rd_kafka_conf_set(c, "enable.auto.commit", "false", why, sizeof why) ||
        rd_kafka_conf_set(c, "enable.partition.eof", "true", why, sizeof why)) {
        fprintf(stderr, "consumer config: %s\n", why);
        rd_kafka_conf_destroy(c);
        return NULL;
    }
    return rd_kafka_new(RD_KAFKA_CONSUMER, c, why, sizeof why);
}

/* Assigns every partition of the topic from the beginning; their count. */
static int assign_all(rd_kafka_t *rk, const char *topic, int timeout_ms)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_topic_partition_list_t *l;
    int n = -1;

    if (t != NULL && rd_kafka_metadata(rk, 0, t, &md, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        md->topic_cnt == 1) {
        n = md->topics[0].partition_cnt;
        l = rd_kafka_topic_partition_list_new(n);
        for (int p = 0; p < n; p++)
            rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
        if (rd_kafka_assign(rk, l) != RD_KAFKA_RESP_ERR_NO_ERROR)
            n = -1;
        rd_kafka_topic_partition_list_destroy(l);
    }
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    if (t != NULL)
        rd_kafka_topic_destroy(t);
    return n;
}

svc_err_t rly_it_consume(const rly_it_kafka_t *k, int timeout_ms, rly_it_record_t **out, size_t *n)
{
    return rly_it_consume_topic(k, RLY_IT_TOPIC, timeout_ms, out, n);
}

svc_err_t rly_it_consume_topic(const rly_it_kafka_t *k, const char *topic, int timeout_ms,
                               rly_it_record_t **out, size_t *n)
{
    uint64_t give_up = svc_now_ms() + (uint64_t)timeout_ms;
    rd_kafka_t *rk = consumer_new(k);
    size_t cap = 0;
    int parts, eofs = 0;
    svc_err_t err = SVC_OK;

    *out = NULL, *n = 0;
    if (rk == NULL)
        return SVC_EINTERNAL;
    parts = assign_all(rk, topic, timeout_ms);
    if (parts <= 0)
        err = SVC_EUNAVAIL;
    while (err == SVC_OK && eofs < parts) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m != NULL && m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            eofs++;
        else if (m != NULL && m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
            err = keep(m, out, n, &cap);
        if (m != NULL)
            rd_kafka_message_destroy(m);
        if (svc_now_ms() > give_up)
            err = SVC_ETIMEDOUT;
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return err;
}

void rly_it_records_free(rly_it_record_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(r[i].value);
    free(r);
}

int rly_it_http_get(int port, const char *path, char *out, size_t cap)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = 5};
    char req[256];
    size_t len = 0;
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;
    const char *body;

    out[0] = '\0';
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* It reads to EOF: a keep-alive server (the notify-sink) must close. */
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
             path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req)) {
        while (len + 1 < cap && (n = recv(fd, out + len, cap - 1 - len, 0)) > 0)
            len += (size_t)n;
        out[len] = '\0';
        if (sscanf(out, "HTTP/1.1 %d", &status) != 1)
            status = -1;
    }
    close(fd);
    body = strstr(out, "\r\n\r\n");
    if (body != NULL)
        memmove(out, body + 4, strlen(body + 4) + 1);
    return status;
}

double rly_it_metric(const char *page, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = page; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    }
    return -1;
}

svc_err_t rly_it_produce(const rly_it_kafka_t *k, const char *topic, const void *key,
                         size_t key_len, const void *value, size_t len, const kfk_header_t *headers,
                         size_t n_headers, int timeout_ms)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_headers_t *hs = rd_kafka_headers_new(n_headers);
    rd_kafka_t *rk;
    rd_kafka_resp_err_t rc;

    rd_kafka_conf_set(conf, "bootstrap.servers", k->brokers, NULL, 0);
    rd_kafka_conf_set(conf, "acks", "all", NULL, 0);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL) {
        fprintf(stderr, "rly_it_produce: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        rd_kafka_headers_destroy(hs);
        return SVC_EINTERNAL;
    }
    for (size_t i = 0; i < n_headers; i++)
        rd_kafka_header_add(hs, headers[i].name, -1, headers[i].value, (ssize_t)headers[i].len);
    rc = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, key_len),
                           RD_KAFKA_V_VALUE((void *)value, len), RD_KAFKA_V_HEADERS(hs),
                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_headers_destroy(hs); /* not taken over on failure */
    else
        rc = rd_kafka_flush(rk, timeout_ms);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR && rd_kafka_outq_len(rk) > 0)
        rc = RD_KAFKA_RESP_ERR__TIMED_OUT;
    rd_kafka_destroy(rk);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "rly_it_produce to %s: %s\n", topic, rd_kafka_err2str(rc));
        return SVC_EUNAVAIL;
    }
    return SVC_OK;
}

int rly_it_group_up(rly_it_kafka_t *k, ord_it_t **ord, char a[37], char b[37])
{
    void *t = NULL;

    rly_it_kafka_cleanup(k);
    if (rly_it_kafka(k, "start") != SVC_OK || ord_it_setup(&t, NULL, NULL) != 0)
        return -1;
    *ord = t;
    ord_it_product(*ord, "Mug", 1299, a);
    ord_it_product(*ord, "Tea", 250, b);
    return 0;
}

int rly_it_group_down(rly_it_kafka_t *k, ord_it_t **ord, spawn_proc_t **relay)
{
    void *t = *ord;
    int rc = rly_it_relay_stop(relay, NULL);

    if (t != NULL && ord_it_teardown(&t) != 0)
        rc = -1;
    *ord = NULL;
    rly_it_kafka_cleanup(k);
    return rc;
}
