/* SPDX-License-Identifier: Apache-2.0 */
/* saga_it.c - see saga_it.h. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "saga_it.h"

int saga_world_up(saga_world_t *w, const char *name)
{
    char errbuf[SVC_ERRBUF_LEN] = "", db[64];

    rly_it_kafka_cleanup(&w->kafka);
    if (rly_it_kafka(&w->kafka, "start") != SVC_OK)
        return -1;
    snprintf(db, sizeof db, "%s_cat", name);
    if (pgtest_db_create(&w->cat_db, db, errbuf) == SVC_OK) {
        snprintf(db, sizeof db, "%s_ord", name);
        if (pgtest_db_create(&w->ord_db, db, errbuf) == SVC_OK)
            return 0;
    }
    fprintf(stderr, "setup: %s\n", errbuf);
    return -1;
}

void saga_world_down(saga_world_t *w)
{
    pgtest_db_drop(&w->cat_db, SVC_ERRBUF_SCRATCH);
    pgtest_db_drop(&w->ord_db, SVC_ERRBUF_SCRATCH);
    rly_it_kafka_cleanup(&w->kafka);
}

void saga_env_add(saga_proc_t *p, const char *name, const char *value)
{
    assert_true(p->n_env < SAGA_IT_ENV_N);
    snprintf(p->env_text[p->n_env], sizeof p->env_text[0], "%s%s%s", name, value != NULL ? "=" : "",
             value != NULL ? value : "");
    p->env[p->n_env] = p->env_text[p->n_env];
    p->env[++p->n_env] = NULL;
}

svc_err_t saga_proc_start(saga_proc_t *p, const char *tag)
{
    char log[PATH_MAX], errbuf[SVC_ERRBUF_LEN] = "";
    spawn_opts_t o;
    svc_err_t err;

    spawn_opts_init(&o);
    o.path = p->bin;
    o.env = p->env;
    snprintf(log, sizeof log, "%s/%s-%s-%d-%d.log", getenv("SVC_TEST_LOG_DIR"), tag, p->name,
             (int)getpid(), p->starts++);
    o.log_path = log;
    err = spawn_start(&o, &p->p, errbuf);
    if (err == SVC_OK)
        err = spawn_log_wait(p->p, p->ready, it_ms(20000));
    if (err != SVC_OK) {
        fprintf(stderr, "%s did not start: %s\n", p->name, errbuf);
        if (p->p != NULL)
            spawn_log_dump(p->p, 30);
    }
    return err;
}

void saga_proc_kill(saga_proc_t *p)
{
    spawn_signal(p->p, SIGKILL);
    spawn_wait_exit(p->p, it_ms(5000), NULL);
    spawn_free(p->p);
    p->p = NULL;
    p->kills++;
}

int saga_proc_stop(saga_proc_t *p)
{
    int st = -1;

    if (p->p == NULL)
        return 0;
    spawn_signal(p->p, SIGTERM);
    if (spawn_wait_exit(p->p, it_ms(20000), &st) != SVC_OK || st != 0) {
        fprintf(stderr, "%s did not exit 0\n", p->name);
        spawn_log_dump(p->p, 30);
        st = -1;
    }
    spawn_free(p->p);
    p->p = NULL;
    return st == 0 ? 0 : -1;
}

void saga_catalog_proc(saga_proc_t *p, const char *name, const char *addr, const saga_world_t *w)
{
    p->name = name;
    p->bin = getenv("CATALOG_BIN");
    p->ready = "listening on";
    saga_env_add(p, "CATALOG_LISTEN", addr);
    saga_env_add(p, "CATALOG_DB_DSN", w->cat_db.dsn);
    saga_env_add(p, "CATALOG_KAFKA_BROKERS", w->kafka.brokers);
}

void saga_order_proc(saga_proc_t *p, const char *addr, const char *catalog_addr,
                     const saga_world_t *w)
{
    p->name = "order";
    p->bin = getenv("ORDER_BIN");
    p->ready = "listening on";
    saga_env_add(p, "ORDER_LISTEN", addr);
    saga_env_add(p, "ORDER_DB_DSN", w->ord_db.dsn);
    saga_env_add(p, "ORDER_CATALOG_ADDR", catalog_addr);
    saga_env_add(p, "ORDER_KAFKA_BROKERS", w->kafka.brokers);
    saga_env_add(p, "ORDER_CATALOG_BREAKER_COOLDOWN_MS=500", NULL);
}

int saga_procs_stop(saga_proc_t *procs, int n)
{
    int rc = 0;

    for (int i = n - 1; i >= 0; i--)
        if (saga_proc_stop(&procs[i]) != 0)
            rc = -1;
    return rc;
}

void saga_relay_proc(saga_proc_t *p, const char *name, const char *dsn, const char *brokers)
{
    p->name = name;
    p->bin = getenv("RELAY_BIN");
    p->ready = "relaying the outbox";
    saga_env_add(p, "RELAY_DB_DSN", dsn);
    saga_env_add(p, "RELAY_KAFKA_BROKERS", brokers);
    saga_env_add(p, "RELAY_NAME", name);
    saga_env_add(p, "RELAY_ADMIN_LISTEN=0", NULL);
    saga_env_add(p, "RELAY_POLL_INTERVAL_MS=1000", NULL);
    saga_env_add(p, "RELAY_KAFKA_DELIVERY_TIMEOUT_MS=3000", NULL);
    saga_env_add(p, "RELAY_BACKOFF_BASE_MS=100", NULL);
    saga_env_add(p, "RELAY_BACKOFF_CAP_MS=1000", NULL);
}

int64_t saga_db_int(const char *dsn, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN];
    int64_t v = -1;

    assert_int_equal(pgtest_scalar_int(dsn, sql, &v, errbuf), SVC_OK);
    return v;
}
