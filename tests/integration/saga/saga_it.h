/* SPDX-License-Identifier: Apache-2.0 */
/*
 * saga_it.h - what the saga's crash tests share: the real services as
 * processes that a test starts, kill -9's and starts again with the same
 * environment (so on the same ports, the same database and, where set, the
 * same consumer instance id), and one-number queries of a database.
 *
 * Start, kill and stop a process from the test's main thread: a child dies
 * with the thread that started it (PR_SET_PDEATHSIG, support/spawn.h).
 */
#ifndef SAGA_IT_H
#define SAGA_IT_H

#include "relay_it.h"

#define SAGA_IT_ENV_N 20

/* A service under test. Zero-initialise, then name, bin, ready and env. */
typedef struct saga_proc {
    const char *name; /* in log file names and messages                   */
    const char *bin;
    const char *ready; /* the log line that says it is up                  */
    char env_text[SAGA_IT_ENV_N][PGTEST_DSN_MAX + 64];
    const char *env[SAGA_IT_ENV_N + 1];
    int n_env, starts, kills;
    spawn_proc_t *p; /* running; NULL when not                           */
} saga_proc_t;

/* A test's broker (deploy/local/kafka.sh, ports of its own) and its two
 * databases. */
typedef struct saga_world {
    rly_it_kafka_t kafka;
    pgtest_db_t cat_db, ord_db;
} saga_world_t;

/* A fresh broker (a run folder a killed run left is removed first) and the
 * databases <name>_cat and <name>_ord. 0, or -1 (what failed is printed). */
int saga_world_up(saga_world_t *w, const char *name);
/* Drops the databases and removes the broker. */
void saga_world_down(saga_world_t *w);

/* NAME=value; value NULL: name is the whole entry ("NAME=VALUE"). */
void saga_env_add(saga_proc_t *p, const char *name, const char *value);

/* Starts p (its log: $SVC_TEST_LOG_DIR/<tag>-<name>-<pid>-<n>.log) and waits
 * for its ready line; what failed is printed. */
svc_err_t saga_proc_start(saga_proc_t *p, const char *tag);
/* SIGKILL (a crash: nothing is closed, committed or left) and reap. */
void saga_proc_kill(saga_proc_t *p);
/* SIGTERM; 0 when it exited 0 (its log is dumped otherwise). 0 when it is
 * not running. */
int saga_proc_stop(saga_proc_t *p);

/* catalog named name on addr, on w's catalog database and broker (not
 * started; add its other settings). */
void saga_catalog_proc(saga_proc_t *p, const char *name, const char *addr, const saga_world_t *w);
/* order on addr, priced by the catalog at catalog_addr with a 500 ms
 * breaker cooldown (the tests restart catalog and order right away), on w's
 * orders database and broker (not started). */
void saga_order_proc(saga_proc_t *p, const char *addr, const char *catalog_addr,
                     const saga_world_t *w);

/* SIGTERM to procs[n - 1] .. procs[0] (saga_proc_stop); 0 when each that
 * ran exited 0. */
int saga_procs_stop(saga_proc_t *procs, int n);

/* A relay of the outbox of dsn to brokers, named name, with quick polls
 * and backoffs (not started). */
void saga_relay_proc(saga_proc_t *p, const char *name, const char *dsn, const char *brokers);

/* The one number sql returns on dsn (a failed query fails the test). */
int64_t saga_db_int(const char *dsn, const char *sql);

#endif
