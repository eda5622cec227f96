/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gw_it.h - what the gateway integration tests share: a catalog (with its
 * own fresh database, catalog_it.h), optionally the order service (its own
 * database, pointed at that catalog), the gateway in front of both, all on
 * free ports, and a small libcurl client that records status, headers,
 * body, new connections and time of each request.
 *
 * Environment (set by tests/integration/gateway/CMakeLists.txt):
 *   GATEWAY_BIN, CATALOG_BIN     the binaries under test (required)
 *   ORDER_BIN                    set only when the tree builds the order service
 *   SVC_TEST_TIMEOUT_MULTIPLIER, SVC_TEST_LOG_DIR, SHOPMICRO_PG_PORT,
 *   SVC_TEST_FILTER              as for the catalog tests
 */
#ifndef GW_IT_H
#define GW_IT_H

#include <curl/curl.h>

#include "catalog_it.h"

/* Room for "Authorization: Bearer " and a token of the gateway's largest. */
#define GW_IT_AUTH_MAX 8300

typedef struct gw_it {
    cat_it_t cat;       /* catalog database, process, channel */
    pgtest_db_t ord_db; /* "" when no order service runs */
    spawn_proc_t *ord;  /* owned; NULL without order */
    char ord_addr[32];  /* also set (to a dead port) without order */
    spawn_proc_t *gw;   /* owned */
    int port;
    char base[64];       /* "http://127.0.0.1:<port>" */
    int admin_port;      /* GATEWAY_ADMIN_LISTEN's */
    char admin_base[64]; /* "http://127.0.0.1:<admin_port>" */
    char *token;         /* owned: sub c1, GW_TOKEN_ALL_SCOPES (gw_token.h); gw_do sends it */
} gw_it_t;

/*
 * cmocka setup: catalog (+ order when with_order), then the gateway with
 * GATEWAY_LISTEN and GATEWAY_ADMIN_LISTEN on free ports, both upstream
 * addresses, 2 threads,
 * GATEWAY_LOG_LEVEL=info, then gw_env (NULL-terminated "NAME=VALUE", may
 * override those). Returns 0/-1; *state gets a new gw_it_t.
 */
int gw_it_setup_env(void **state, bool with_order, const char *const *gw_env);
/* The same, with cat_env (NULL-terminated, may be NULL) added to the
 * catalog's environment. */
int gw_it_setup_envs(void **state, bool with_order, const char *const *cat_env,
                     const char *const *gw_env);
/* cmocka teardown: SIGTERM every process and require exit status 0 (so,
 * in sanitizer builds, no leak), drop the databases, free *state. */
int gw_it_teardown(void **state);

/* "GATEWAY_LOCK_DIR=<dir>": the instance lock files of test gateways go
 * to $SVC_TEST_LOG_DIR (else $TMPDIR or /tmp), not to the shared /tmp. */
const char *gw_it_lock_dir_env(void);

/* Starts the gateway only (t->port etc. are set). */
svc_err_t gw_it_gateway_start(gw_it_t *t, const char *const *env,
                              char errbuf[static SVC_ERRBUF_LEN]);
/* SIGTERM the gateway; 0 when it exited with status 0 within the drain
 * bound (its log is dumped otherwise). Safe when it is not running. */
int gw_it_gateway_stop(gw_it_t *t);

/* kill -9 the catalog and reap it (t->cat.proc becomes NULL: the teardown
 * expects no exit status from it). Its channel and database stay. */
void gw_it_catalog_kill(gw_it_t *t);
/* Starts the catalog again on the address the gateway knows (t->cat.addr)
 * and the same database; waits until it listens. */
svc_err_t gw_it_catalog_restart(gw_it_t *t, char errbuf[static SVC_ERRBUF_LEN]);

/* SIGSTOP p and wait (bounded) until every one of its threads has stopped,
 * so that nothing it was doing can still answer afterwards. */
void gw_it_freeze(spawn_proc_t *p);

/* gw_it_setup_env with the services started under a soft RLIMIT_NOFILE of
 * `soft` (e.g. 1024, the usual default of systemd units and containers);
 * this process gets its own limit back. -1 when that limit cannot be set. */
int gw_it_setup_nofile(void **state, unsigned long long soft, const char *const *gw_env);
/* "Max open files" of pid as /proc shows them ("1024", "unlimited");
 * false when they cannot be read. */
bool gw_it_nofile(pid_t pid, char soft[32], char hard[32]);

/* ---- HTTP ---------------------------------------------------------------- */

typedef struct gw_res {
    CURLcode rc; /* CURLE_OK, CURLE_OPERATION_TIMEDOUT ... */
    long status;
    char *body; /* NUL-terminated, owned (gw_res_free) */
    size_t body_len;
    char *head;    /* the response header block, NUL-terminated, owned */
    long connects; /* CURLINFO_NUM_CONNECTS: 0 = the connection was reused */
    double ms;     /* CURLINFO_TOTAL_TIME */
} gw_res_t;

typedef struct gw_req {
    const char *method;         /* "GET", "POST", "HEAD", anything */
    const char *path;           /* "/v1/products?page_size=2" */
    const char *body;           /* NULL: none */
    size_t body_len;            /* 0 with body != NULL: strlen(body) */
    const char *const *headers; /* NULL-terminated "Name: value", may be NULL */
    long timeout_ms;            /* 0: 10 s */
    bool anonymous;             /* no Authorization; else t->token unless headers have one */
} gw_req_t;

/* One request on handle h (reused handles keep their connection), with
 * the fixture's token unless rq says otherwise. */
void gw_do(CURL *h, const gw_it_t *t, const gw_req_t *rq, gw_res_t *out);
/* Shorthand: method, path, optional body, optional header list. */
void gw_call(CURL *h, const gw_it_t *t, const char *method, const char *path, const char *body,
             const char *const *headers, gw_res_t *out);
void gw_res_free(gw_res_t *r);
/* GET path on the gateway's admin port (t->admin_base). */
void gw_admin_get(CURL *h, const gw_it_t *t, const char *path, gw_res_t *out);

/* The value of response header `name` (case-insensitive) into out; false
 * when absent. */
bool gw_res_header(const gw_res_t *r, const char *name, char *out, size_t len);
/* The string value of the first "key":"..." in json (no unescaping). */
bool gw_json_str(const char *json, const char *key, char *out, size_t len);

/* Fails the test unless r has the status, printing the body. */
void gw_assert_status(const gw_res_t *r, long status);
/* Status, Content-Type application/json and exactly this body. */
void gw_assert_body(const gw_res_t *r, long status, const char *body);
/* Status, an error body {"code":code,"message":"...",...} whose message
 * contains part, and Content-Type application/json. */
void gw_assert_error(const gw_res_t *r, long status, int code, const char *part);
/* The rest of an error body after its message, for an answer the gateway
 * decided for reason without naming an upstream (gateway/status.h). */
#define GW_INFO(reason)                                                                            \
    ",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"" reason   \
    "\",\"domain\":\"gateway.shopmicro\",\"metadata\":{}}]}"
/* The error body's ErrorInfo has this reason and domain. */
void gw_assert_error_info(const gw_res_t *r, const char *reason, const char *domain);
/* The error body has a RetryInfo of exactly the Retry-After header's
 * seconds, and there is one. */
void gw_assert_retry_info(const gw_res_t *r);

/* Creates a product through the gateway; its id into id (37 bytes). */
void gw_it_product(CURL *h, const gw_it_t *t, const char *name, int64_t price_cents, int32_t stock,
                   char id[37]);

#endif
