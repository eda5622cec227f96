/* SPDX-License-Identifier: Apache-2.0 */
/* gw_it.c - the gateway integration tests' fixture and HTTP client (gw_it.h). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "gw_it.h"
#include "gw_token.h"

#define ENV_MAX     64
#define START_TRIES 3
#define BODY_MAX    (8 * 1024 * 1024)

static const char *binary(const char *var)
{
    const char *bin = getenv(var);

    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "%s is not set: run this test through ctest\n", var);
        exit(2);
    }
    return bin;
}

/* Starts path with env, waits for "listening on"; retries a lost port race
 * (needle: how the program says "address in use") with a new port from
 * pick(). */
static svc_err_t start_listening(const char *path, const char **env, char *listen_entry,
                                 size_t entry_len, const char *var, char *addr, size_t addr_len,
                                 int *port, const char *needle, spawn_proc_t **out,
                                 char errbuf[static SVC_ERRBUF_LEN])
{
    spawn_opts_t o;
    svc_err_t err = SVC_EINTERNAL;

    spawn_opts_init(&o);
    o.path = path;
    o.env = env;
    for (int attempt = 0; attempt < START_TRIES; attempt++) {
        *port = spawn_free_port();
        snprintf(addr, addr_len, "127.0.0.1:%d", *port);
        snprintf(listen_entry, entry_len, "%s=%s", var, addr);
        err = spawn_start(&o, out, errbuf);
        if (err != SVC_OK)
            return err;
        err = spawn_log_wait(*out, "listening on", it_ms(IT_START_MS));
        if (err == SVC_OK)
            return spawn_wait_port(*out, "127.0.0.1", *port, it_ms(2000), errbuf);
        if (err == SVC_EUNAVAIL && attempt + 1 < START_TRIES && spawn_log_contains(*out, needle)) {
            spawn_free(*out);
            *out = NULL;
            continue;
        }
        svc_errbuf_set(errbuf, "%s did not start (%s); log %s", path,
                       err == SVC_ETIMEDOUT ? "timed out" : "it exited", spawn_log_path(*out));
        spawn_log_dump(*out, 40);
        return err;
    }
    return err;
}

static svc_err_t order_start(gw_it_t *t, char errbuf[static SVC_ERRBUF_LEN])
{
    char listen[64], dsn[PGTEST_DSN_MAX + 32], cat[64];
    const char *env[] = {listen, dsn, cat, "ORDER_LOG_LEVEL=info", NULL};
    int port;
    svc_err_t err = pgtest_db_create(&t->ord_db, "gw_order_it", errbuf);

    if (err != SVC_OK)
        return err;
    snprintf(dsn, sizeof dsn, "ORDER_DB_DSN=%s", t->ord_db.dsn);
    snprintf(cat, sizeof cat, "ORDER_CATALOG_ADDR=%s", t->cat.addr);
    return start_listening(binary("ORDER_BIN"), env, listen, sizeof listen, "ORDER_LISTEN",
                           t->ord_addr, sizeof t->ord_addr, &port, "Address already in use",
                           &t->ord, errbuf);
}

const char *gw_it_lock_dir_env(void)
{
    static char entry[600];
    const char *dir = getenv("SVC_TEST_LOG_DIR");

    if (dir == NULL || dir[0] == '\0')
        dir = getenv("TMPDIR");
    snprintf(entry, sizeof entry, "GATEWAY_LOCK_DIR=%s",
             dir != NULL && dir[0] != '\0' ? dir : "/tmp");
    return entry;
}

svc_err_t gw_it_gateway_start(gw_it_t *t, const char *const *env,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    char listen[64], cat[64], ord[64], admin[64];
    const char *full[ENV_MAX];
    size_t n = 0;

    t->admin_port = spawn_free_port();
    snprintf(admin, sizeof admin, "GATEWAY_ADMIN_LISTEN=127.0.0.1:%d", t->admin_port);
    snprintf(t->admin_base, sizeof t->admin_base, "http://127.0.0.1:%d", t->admin_port);
    full[n++] = listen;
    full[n++] = admin;
    full[n++] = cat;
    full[n++] = ord;
    full[n++] = "GATEWAY_THREADS=2";
    full[n++] = "GATEWAY_LOG_LEVEL=info";
    full[n++] = gw_it_lock_dir_env();
    for (int i = 0; i < 3; i++)
        full[n++] = gw_token_env(i);
    /* One client sends every request here: a test about limits sets its own. */
    full[n++] = "GATEWAY_RATE_LIMITS=off";
    for (size_t i = 0; env != NULL && env[i] != NULL && n < ENV_MAX - 1; i++)
        full[n++] = env[i];
    full[n] = NULL;
    snprintf(cat, sizeof cat, "GATEWAY_CATALOG_ADDR=%s", t->cat.addr);
    snprintf(ord, sizeof ord, "GATEWAY_ORDER_ADDR=%s", t->ord_addr);
    {
        char addr[32];
        svc_err_t err =
            start_listening(binary("GATEWAY_BIN"), full, listen, sizeof listen, "GATEWAY_LISTEN",
                            addr, sizeof addr, &t->port, "already in use", &t->gw, errbuf);
        snprintf(t->base, sizeof t->base, "http://%s", addr);
        return err;
    }
}

int gw_it_setup_env(void **state, bool with_order, const char *const *gw_env)
{
    return gw_it_setup_envs(state, with_order, NULL, gw_env);
}

int gw_it_setup_envs(void **state, bool with_order, const char *const *cat_env,
                     const char *const *gw_env)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_it_t *t = calloc(1, sizeof *t);

    *state = t;
    if (t == NULL)
        return -1;
    t->token = gw_token("c1", GW_TOKEN_ALL_SCOPES);
    if (cat_it_db_create(&t->cat, errbuf) != SVC_OK ||
        cat_it_start(&t->cat, cat_env, errbuf) != SVC_OK)
        goto fail;
    if (with_order) {
        if (order_start(t, errbuf) != SVC_OK)
            goto fail;
    } else {
        /* Nothing listens there: the order upstream is simply down. */
        snprintf(t->ord_addr, sizeof t->ord_addr, "127.0.0.1:%d", spawn_free_port());
    }
    if (gw_it_gateway_start(t, gw_env, errbuf) != SVC_OK)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "setup failed: %s\n", errbuf);
    gw_it_teardown(state); /* cmocka runs no teardown after a failed setup */
    return -1;
}

/* SIGTERM, then require exit 0; dumps the log otherwise. */
static int stop_proc(spawn_proc_t **pp, const char *what)
{
    char st[64];
    int wstatus = -1, rc = 0;
    spawn_proc_t *p = *pp;

    if (p == NULL)
        return 0;
    if (spawn_stopped(p))
        spawn_signal(p, SIGCONT);
    if (spawn_alive(p))
        spawn_signal(p, SIGTERM);
    if (spawn_wait_exit(p, it_ms(15000), &wstatus) != SVC_OK) {
        fprintf(stderr, "%s pid %d ignored SIGTERM: killing it\n", what, (int)spawn_pid(p));
        rc = -1;
    } else if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        spawn_status_text(wstatus, st, sizeof st);
        fprintf(stderr, "%s pid %d ended with %s, not exit 0\n", what, (int)spawn_pid(p), st);
        rc = -1;
    }
    if (rc != 0)
        spawn_log_dump(p, 60);
    spawn_free(p);
    *pp = NULL;
    return rc;
}

int gw_it_gateway_stop(gw_it_t *t)
{
    return stop_proc(&t->gw, "gateway");
}

int gw_it_teardown(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_it_t *t = *state;
    int rc = 0;

    if (t == NULL)
        return 0;
    rc |= gw_it_gateway_stop(t);
    rc |= stop_proc(&t->ord, "order");
    rc |= cat_it_stop(&t->cat);
    if (pgtest_db_drop(&t->ord_db, errbuf) != SVC_OK) {
        fprintf(stderr, "cannot drop %s: %s\n", t->ord_db.name, errbuf);
        rc = -1;
    }
    if (pgtest_db_drop(&t->cat.db, errbuf) != SVC_OK) {
        fprintf(stderr, "cannot drop %s: %s\n", t->cat.db.name, errbuf);
        rc = -1;
    }
    free(t->token);
    free(t);
    *state = NULL;
    return rc != 0 ? -1 : 0;
}

void gw_it_catalog_kill(gw_it_t *t)
{
    spawn_signal(t->cat.proc, SIGKILL);
    spawn_wait_exit(t->cat.proc, it_ms(5000), NULL);
    spawn_free(t->cat.proc);
    t->cat.proc = NULL;
}

svc_err_t gw_it_catalog_restart(gw_it_t *t, char errbuf[static SVC_ERRBUF_LEN])
{
    char listen[64], dsn[PGTEST_DSN_MAX + 32];
    const char *env[] = {listen, dsn, "CATALOG_LOG_LEVEL=info", NULL};
    spawn_opts_t o;
    svc_err_t err;

    snprintf(listen, sizeof listen, "CATALOG_LISTEN=%s", t->cat.addr);
    snprintf(dsn, sizeof dsn, "CATALOG_DB_DSN=%s", t->cat.db.dsn);
    spawn_opts_init(&o);
    o.path = cat_it_binary();
    o.env = env;
    err = spawn_start(&o, &t->cat.proc, errbuf);
    if (err != SVC_OK)
        return err;
    /* The port was ours a moment ago; nothing else should have taken it. */
    err = spawn_log_wait(t->cat.proc, "listening on", it_ms(IT_START_MS));
    if (err != SVC_OK) {
        svc_errbuf_set(errbuf, "the catalog did not start again on %s; log %s", t->cat.addr,
                       spawn_log_path(t->cat.proc));
        spawn_log_dump(t->cat.proc, 30);
        return err;
    }
    return spawn_wait_port(t->cat.proc, "127.0.0.1", t->cat.port, it_ms(2000), errbuf);
}

/* True when every thread of pid is in state 'T' (signal stop). */
static bool all_threads_stopped(pid_t pid)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    bool all = true, any = false;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    d = opendir(path);
    if (d == NULL)
        return false;
    while (all && (e = readdir(d)) != NULL) {
        char stat[320], buf[512], *state;
        FILE *f;
        size_t n;

        if (e->d_name[0] == '.')
            continue;
        if (snprintf(stat, sizeof stat, "%s/%.200s/stat", path, e->d_name) >= (int)sizeof stat)
            continue;
        f = fopen(stat, "r");
        if (f == NULL)
            continue; /* the thread just ended */
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        state = strrchr(buf, ')');
        any = true;
        all = state != NULL && state[1] == ' ' && state[2] == 'T';
    }
    closedir(d);
    return any && all;
}

void gw_it_freeze(spawn_proc_t *p)
{
    uint64_t until = it_now_ms() + (uint64_t)it_ms(2000);

    spawn_signal(p, SIGSTOP);
    while (!all_threads_stopped(spawn_pid(p))) {
        if (it_now_ms() > until)
            fail_msg("pid %d did not stop", (int)spawn_pid(p));
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    }
}

/* ---- HTTP ---------------------------------------------------------------- */

typedef struct sink {
    char *p;
    size_t len, cap;
} sink_t;

static size_t sink_write(char *data, size_t size, size_t n, void *arg)
{
    sink_t *s = arg;
    size_t len = size * n;

    if (s->len + len + 1 > BODY_MAX)
        return 0;
    if (s->len + len + 1 > s->cap) {
        size_t cap = (s->len + len + 1) * 2;
        char *p = realloc(s->p, cap);
        if (p == NULL)
            return 0;
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->len, data, len);
    s->len += len;
    s->p[s->len] = '\0';
    return len;
}

void gw_do(CURL *h, const gw_it_t *t, const gw_req_t *rq, gw_res_t *out)
{
    char url[1024];
    struct curl_slist *hdrs = NULL;
    sink_t body = {NULL, 0, 0}, head = {NULL, 0, 0};
    double secs = 0;
    bool has_auth = false;

    memset(out, 0, sizeof *out);
    /* Resets options only: the connection cache (keep-alive) survives. */
    curl_easy_reset(h);
    snprintf(url, sizeof url, "%s%s", t->base, rq->path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms > 0 ? rq->timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_write);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &head);
    if (strcmp(rq->method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else if (strcmp(rq->method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    if (rq->body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(rq->body_len > 0 ? rq->body_len : strlen(rq->body)));
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
    }
    for (size_t i = 0; rq->headers != NULL && rq->headers[i] != NULL; i++) {
        hdrs = curl_slist_append(hdrs, rq->headers[i]);
        has_auth = has_auth || strncasecmp(rq->headers[i], "authorization:", 14) == 0;
    }
    if (!rq->anonymous && !has_auth && t->token != NULL) {
        char bearer[GW_IT_AUTH_MAX];
        snprintf(bearer, sizeof bearer, "Authorization: Bearer %s", t->token);
        hdrs = curl_slist_append(hdrs, bearer);
    }
    if (hdrs != NULL)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    out->rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &out->connects);
    curl_easy_getinfo(h, CURLINFO_TOTAL_TIME, &secs);
    out->ms = secs * 1000.0;
    curl_slist_free_all(hdrs);
    out->body = body.p != NULL ? body.p : calloc(1, 1);
    out->body_len = body.len;
    out->head = head.p != NULL ? head.p : calloc(1, 1);
}

void gw_call(CURL *h, const gw_it_t *t, const char *method, const char *path, const char *body,
             const char *const *headers, gw_res_t *out)
{
    gw_req_t rq = {method, path, body, 0, headers, 0, false};

    gw_do(h, t, &rq, out);
}

void gw_admin_get(CURL *h, const gw_it_t *t, const char *path, gw_res_t *out)
{
    gw_it_t admin = *t;

    snprintf(admin.base, sizeof admin.base, "%s", t->admin_base);
    gw_call(h, &admin, "GET", path, NULL, NULL, out);
}

void gw_res_free(gw_res_t *r)
{
    free(r->body);
    free(r->head);
    r->body = r->head = NULL;
}

bool gw_res_header(const gw_res_t *r, const char *name, char *out, size_t len)
{
    size_t nl = strlen(name);

    for (const char *line = r->head; line != NULL && *line != '\0';) {
        const char *eol = strstr(line, "\r\n");
        size_t ll = eol != NULL ? (size_t)(eol - line) : strlen(line);

        if (ll > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            size_t vl = ll - nl - 1;
            while (vl > 0 && *v == ' ') {
                v++;
                vl--;
            }
            snprintf(out, len, "%.*s", (int)vl, v);
            return true;
        }
        line = eol != NULL ? eol + 2 : NULL;
    }
    return false;
}

bool gw_json_str(const char *json, const char *key, char *out, size_t len)
{
    char pat[128];
    const char *p, *end;

    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    p = strstr(json, pat);
    if (p == NULL)
        return false;
    p += strlen(pat);
    end = strchr(p, '"');
    if (end == NULL)
        return false;
    snprintf(out, len, "%.*s", (int)(end - p), p);
    return true;
}

void gw_assert_status(const gw_res_t *r, long status)
{
    if (r->rc != CURLE_OK)
        fail_msg("request failed: %s", curl_easy_strerror(r->rc));
    if (r->status != status)
        fail_msg("status %ld, want %ld; body %s", r->status, status, r->body);
}

static void assert_json(const gw_res_t *r)
{
    char ct[128] = "";

    if (!gw_res_header(r, "Content-Type", ct, sizeof ct) || strcmp(ct, "application/json") != 0)
        fail_msg("Content-Type \"%s\", want application/json", ct);
}

void gw_assert_body(const gw_res_t *r, long status, const char *body)
{
    gw_assert_status(r, status);
    assert_json(r);
    if (strcmp(r->body, body) != 0)
        fail_msg("body\n  %s\nwant\n  %s", r->body, body);
}

/* Where every error body's details begin (gateway/status.h). */
#define ERROR_INFO "\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\","

void gw_assert_error_info(const gw_res_t *r, const char *reason, const char *domain)
{
    char want[160];

    snprintf(want, sizeof want, ERROR_INFO "\"reason\":\"%s\",\"domain\":\"%s\"", reason, domain);
    if (strstr(r->body, want) == NULL)
        fail_msg("body %s has no ErrorInfo with reason %s in domain %s", r->body, reason, domain);
}

void gw_assert_retry_info(const gw_res_t *r)
{
    char v[16], want[96];

    if (!gw_res_header(r, "Retry-After", v, sizeof v))
        fail_msg("no Retry-After with body %s", r->body);
    snprintf(want, sizeof want,
             "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"%ss\"}]}",
             v);
    if (r->body_len < strlen(want) || strcmp(r->body + r->body_len - strlen(want), want) != 0)
        fail_msg("body %s does not end with a RetryInfo of Retry-After: %s", r->body, v);
}

void gw_assert_error(const gw_res_t *r, long status, int code, const char *part)
{
    char head[32], msg[512];

    gw_assert_status(r, status);
    assert_json(r);
    snprintf(head, sizeof head, "{\"code\":%d,\"message\":\"", code);
    if (strncmp(r->body, head, strlen(head)) != 0 || strstr(r->body, ERROR_INFO) == NULL ||
        strcmp(r->body + r->body_len - 2, "]}") != 0)
        fail_msg("body %s is not an error body with code %d and an ErrorInfo", r->body, code);
    if (!gw_json_str(r->body, "message", msg, sizeof msg) || strstr(r->body, part) == NULL)
        fail_msg("message of %s does not mention \"%s\"", r->body, part);
}

void gw_it_product(CURL *h, const gw_it_t *t, const char *name, int64_t price_cents, int32_t stock,
                   char id[37])
{
    char body[256];
    gw_res_t r;

    snprintf(body, sizeof body, "{\"name\":\"%s\",\"price_cents\":%lld,\"stock\":%d}", name,
             (long long)price_cents, (int)stock);
    gw_call(h, t, "POST", "/v1/products", body, NULL, &r);
    gw_assert_status(&r, 200);
    if (!gw_json_str(r.body, "id", id, 37) || !it_is_uuid(id))
        fail_msg("no product id in %s", r.body);
    gw_res_free(&r);
}

int gw_it_setup_nofile(void **state, unsigned long long soft, const char *const *gw_env)
{
    struct rlimit rl, saved;
    int rc;

    if (getrlimit(RLIMIT_NOFILE, &saved) != 0)
        return -1;
    rl = saved;
    rl.rlim_cur = (rlim_t)soft;
    if (soft < 64 || rl.rlim_cur > rl.rlim_max || setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr,
                "cannot start the services with a soft limit of %llu open files "
                "(hard limit %llu)\n",
                soft, (unsigned long long)saved.rlim_max);
        return -1;
    }
    rc = gw_it_setup_env(state, false, gw_env);
    setrlimit(RLIMIT_NOFILE, &saved);
    return rc;
}

bool gw_it_nofile(pid_t pid, char soft[32], char hard[32])
{
    char path[64], line[256];
    bool found = false;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return false;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = sscanf(line, "Max open files %31s %31s", soft, hard) == 2;
    fclose(f);
    return found;
}
