/* SPDX-License-Identifier: Apache-2.0 */
/*
 * When pkg/db calls a statement done: against a fake Postgres on loopback
 * that speaks just enough of the v3 protocol (startup, Parse, Bind,
 * Describe, Execute, Sync) to answer a statement's rows and CommandComplete,
 * and then does one thing in place of ReadyForQuery:
 *
 *   ready      ReadyForQuery 'I': done (the implicit transaction committed)
 *   close      the connection closes: the rows prove nothing, the outcome
 *              is unknown (what a backend ended by a fast shutdown between
 *              the rows and the commit looks like)
 *   fatal      FATAL 57P01 then close: unknown too
 *   open_tx    ReadyForQuery 'T': the statement left a transaction open
 *   error      an ERROR (23505) in place of the rows, then 'I': a verdict
 *   stall      nothing: the deadline ends the wait, outcome unknown
 *
 * Postgres itself cannot be made to stop between the two on cue; the
 * integration test test_order_durability meets the same case by chance.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "db/db.h"
#include "support/group.h"
#include "support/listen.h"
#include "support/scale.h"

typedef enum after_rows {
    AFTER_READY,
    AFTER_CLOSE,
    AFTER_FATAL,
    AFTER_OPEN_TX,
    AFTER_ERROR,
    AFTER_STALL
} after_rows_t;

typedef struct fake_pg {
    int listen_fd, port;
    pthread_t thread;
    volatile after_rows_t after; /* for the next statement; set before the call */
    volatile int stalled_ms;     /* how long AFTER_STALL keeps quiet before closing */
    _Atomic int executes;        /* Execute messages seen, over every connection */
    volatile int stop;
} fake_pg_t;

/* ---- the wire ------------------------------------------------------------- */

static int read_full(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static void put32(char *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

/* One backend message: type, then its body of n bytes. */
static void send_msg(int fd, char type, const void *body, size_t n)
{
    char buf[512];

    buf[0] = type;
    put32(buf + 1, (uint32_t)(n + 4));
    memcpy(buf + 5, body, n);
    if (write(fd, buf, n + 5) != (ssize_t)(n + 5))
        return; /* the client is gone: what the next read will tell */
}

static void ready(int fd, char status)
{
    send_msg(fd, 'Z', &status, 1);
}

/* ErrorResponse with severity sev, SQLSTATE code and message text. */
static void send_error(int fd, const char *sev, const char *code, const char *text)
{
    char body[256];
    int n = snprintf(body, sizeof body, "S%s%cV%s%cC%s%cM%s%c", sev, 0, sev, 0, code, 0, text, 0);

    body[n] = '\0'; /* the field list's terminator */
    send_msg(fd, 'E', body, (size_t)n + 1);
}

/* One int4 column "n": RowDescription, as Describe (portal) is answered. */
static void send_row_description(int fd)
{
    static const char body[] = {0,          1,          'n',        0,          0, 0,  0, 0,
                                0,          0,          0,          0,          0, 23, 0, 4,
                                (char)0xff, (char)0xff, (char)0xff, (char)0xff, 0, 0};

    send_msg(fd, 'T', body, sizeof body);
}

static void send_rows(int fd)
{
    static const char row[] = {0, 1, 0, 0, 0, 1, '1'};

    send_msg(fd, 'D', row, sizeof row);
    send_msg(fd, 'C', "SELECT 1", 9);
}

/* Startup: an SSL or GSS request is refused ('N'), then AuthenticationOk,
 * BackendKeyData and ReadyForQuery. */
static int handshake(int fd)
{
    char len[4], body[1024];
    uint32_t n, code;

    for (;;) {
        if (read_full(fd, len, 4) != 0)
            return -1;
        memcpy(&n, len, 4);
        n = ntohl(n);
        if (n < 8 || n - 4 > sizeof body || read_full(fd, body, n - 4) != 0)
            return -1;
        memcpy(&code, body, 4);
        code = ntohl(code);
        if (code != 80877103 && code != 80877104) /* SSLRequest, GSSENCRequest */
            break;
        if (write(fd, "N", 1) != 1)
            return -1;
    }
    send_msg(fd, 'R', "\0\0\0\0", 4);
    send_msg(fd, 'K', "\0\0\0\1\0\0\0\2", 8);
    ready(fd, 'I');
    return 0;
}

/* What Sync answers after an Execute: 0 to go on, -1 to end the connection. */
static int after_execute(fake_pg_t *f, int fd, after_rows_t after)
{
    switch (after) {
    case AFTER_READY:
    case AFTER_ERROR:
        ready(fd, 'I');
        return 0;
    case AFTER_OPEN_TX:
        ready(fd, 'T');
        return 0;
    case AFTER_FATAL:
        send_error(fd, "FATAL", "57P01", "terminating connection due to administrator command");
        return -1;
    case AFTER_STALL:
        usleep((useconds_t)f->stalled_ms * 1000);
        return -1;
    case AFTER_CLOSE:
        return -1;
    }
    return -1;
}

/* One connection, until the client or the scenario ends it. */
static void serve(fake_pg_t *f, int fd)
{
    bool executed = false;
    after_rows_t after = AFTER_READY;

    if (handshake(fd) != 0)
        return;
    for (;;) {
        char hdr[5], body[4096];
        uint32_t n;

        if (read_full(fd, hdr, 5) != 0)
            return;
        memcpy(&n, hdr + 1, 4);
        n = ntohl(n);
        if (n < 4 || n - 4 > sizeof body || read_full(fd, body, n - 4) != 0)
            return;
        switch (hdr[0]) {
        case 'P':
            send_msg(fd, '1', "", 0);
            break;
        case 'B':
            send_msg(fd, '2', "", 0);
            break;
        case 'D':
            send_row_description(fd);
            break;
        case 'E':
            executed = true;
            after = f->after;
            f->executes++;
            if (after == AFTER_ERROR)
                send_error(fd, "ERROR", "23505", "duplicate key value violates unique constraint");
            else
                send_rows(fd);
            break;
        case 'S':
            if (!executed)
                ready(fd, 'I');
            else if (after_execute(f, fd, after) != 0)
                return;
            executed = false;
            break;
        case 'X':
            return;
        default:
            return; /* not spoken here */
        }
    }
}

typedef struct session {
    fake_pg_t *f;
    int fd;
} session_t;

static void *session_main(void *arg)
{
    session_t *s = arg;

    serve(s->f, s->fd);
    close(s->fd);
    free(s);
    return NULL;
}

/* A thread per connection: a test that fails leaves its connection open,
 * and the next test must still be served. */
static void *fake_main(void *arg)
{
    fake_pg_t *f = arg;

    while (!f->stop) {
        int fd = accept(f->listen_fd, NULL, NULL);
        session_t *s = fd >= 0 ? malloc(sizeof *s) : NULL;
        pthread_t t;

        if (s == NULL) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        *s = (session_t){f, fd};
        if (pthread_create(&t, NULL, session_main, s) != 0) {
            close(fd);
            free(s);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

/* ---- fixture -------------------------------------------------------------- */

static const db_stmt_t stmts[] = {
    {"write", "SELECT 1", 0, 0},
    {"read", "SELECT 1", 0, DB_STMT_IDEMPOTENT},
};

enum { WRITE, READ };

static int setup(void **state)
{
    static fake_pg_t f;

    memset(&f, 0, sizeof f);
    if ((f.listen_fd = svc_test_listen_loopback(&f.port)) < 0)
        return -1;
    if (pthread_create(&f.thread, NULL, fake_main, &f) != 0)
        return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fake_pg_t *f = *state;

    f->stop = 1;
    shutdown(f->listen_fd, SHUT_RDWR); /* wakes accept() */
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    return 0;
}

static db_conn_t *conn(const fake_pg_t *f)
{
    char dsn[160];
    db_conn_t *c = NULL;

    snprintf(dsn, sizeof dsn,
             "host=127.0.0.1 port=%d dbname=fake user=fake sslmode=disable gssencmode=disable",
             f->port);
    assert_int_equal(db_conn_open(dsn, stmts, 2, 5000, "test", &c, SVC_ERRBUF_SCRATCH), SVC_OK);
    return c;
}

/* Runs statement idx with the fake doing `after` once its rows are out. */
static svc_err_t run(fake_pg_t *f, db_conn_t *c, size_t idx, after_rows_t after, int deadline_ms,
                     char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r = NULL;
    svc_err_t err;

    f->after = after;
    err = db_exec(c, idx, NULL, svc_now_ns() + (uint64_t)deadline_ms * SVC_NS_PER_MS, &r, errbuf);
    if (err == SVC_OK)
        assert_string_equal(PQgetvalue(r, 0, 0), "1");
    else
        assert_null(r);
    PQclear(r);
    return err;
}

/* ---- tests ---------------------------------------------------------------- */

static void ready_for_query_makes_it_done(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(*state);

    assert_int_equal(run(*state, c, WRITE, AFTER_READY, 2000, errbuf), SVC_OK);
    assert_false(db_outcome_unknown(c));
    db_conn_free(c);
}

static void rows_then_a_closed_connection_are_unknown(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(*state);

    assert_int_equal(run(*state, c, WRITE, AFTER_CLOSE, 2000, errbuf), SVC_EUNAVAIL);
    assert_true(db_outcome_unknown(c));
    assert_non_null(strstr(errbuf, "outcome unknown"));
    /* The next call makes a new connection and is done as usual. */
    assert_int_equal(run(*state, c, WRITE, AFTER_READY, 2000, errbuf), SVC_OK);
    assert_false(db_outcome_unknown(c));
    db_conn_free(c);
}

static void rows_then_fatal_are_unknown(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(*state);

    assert_int_equal(run(*state, c, WRITE, AFTER_FATAL, 2000, errbuf), SVC_EUNAVAIL);
    assert_true(db_outcome_unknown(c));
    assert_non_null(strstr(errbuf, "administrator command"));
    db_conn_free(c);
}

static void a_transaction_left_open_is_not_done(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(*state);

    assert_int_equal(run(*state, c, WRITE, AFTER_OPEN_TX, 2000, errbuf), SVC_EINTERNAL);
    assert_non_null(strstr(errbuf, "transaction status"));
    db_conn_free(c);
}

static void an_error_then_ready_is_a_verdict(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(*state);

    assert_int_equal(run(*state, c, WRITE, AFTER_ERROR, 2000, errbuf), SVC_EEXIST);
    assert_false(db_outcome_unknown(c));
    assert_true(db_conn_ok(c)); /* the session goes on */
    db_conn_free(c);
}

/* Between the rows and ReadyForQuery libpq's PQgetResult would wait
 * without bound; the deadline ends it. */
static void a_stall_after_the_rows_ends_at_the_deadline(void **state)
{
    fake_pg_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(f);
    uint64_t t0;

    /* Connected first: a slow connect would spend the short deadline. */
    assert_int_equal(run(f, c, WRITE, AFTER_READY, 2000, errbuf), SVC_OK);
    f->stalled_ms = svc_test_ms(3000);
    t0 = svc_now_ns();
    assert_int_equal(run(f, c, WRITE, AFTER_STALL, 200, errbuf), SVC_ETIMEDOUT);
    assert_true(svc_now_ns() - t0 < (uint64_t)svc_test_ms(1000) * SVC_NS_PER_MS);
    assert_true(db_outcome_unknown(c));
    db_conn_free(c);
}

/* An idempotent statement lost that way is run once more on a new
 * connection (here lost again, so both runs reach the server). */
static void an_idempotent_statement_is_run_again(void **state)
{
    fake_pg_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(f);
    int before;

    assert_int_equal(run(f, c, READ, AFTER_READY, 2000, errbuf), SVC_OK); /* idle, connected */
    before = f->executes;
    assert_int_equal(run(f, c, READ, AFTER_CLOSE, 2000, errbuf), SVC_EUNAVAIL);
    assert_int_equal(f->executes - before, 2);
    assert_true(db_outcome_unknown(c));
    db_conn_free(c);
}

/* db_send/db_receive (the relay's halves) follow the same rule. */
static void the_two_halves_wait_for_ready_too(void **state)
{
    fake_pg_t *f = *state;
    char errbuf[SVC_ERRBUF_LEN] = "";
    db_conn_t *c = conn(f);
    PGresult *r = NULL;

    f->after = AFTER_CLOSE;
    assert_int_equal(db_send(c, WRITE, NULL, errbuf), SVC_OK);
    assert_int_equal(db_receive(c, svc_now_ns() + 2000 * SVC_NS_PER_MS, &r, errbuf), SVC_EUNAVAIL);
    assert_null(r);
    assert_true(db_outcome_unknown(c));
    db_conn_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ready_for_query_makes_it_done),
        cmocka_unit_test(rows_then_a_closed_connection_are_unknown),
        cmocka_unit_test(rows_then_fatal_are_unknown),
        cmocka_unit_test(a_transaction_left_open_is_not_done),
        cmocka_unit_test(an_error_then_ready_is_a_verdict),
        cmocka_unit_test(a_stall_after_the_rows_ends_at_the_deadline),
        cmocka_unit_test(an_idempotent_statement_is_run_again),
        cmocka_unit_test(the_two_halves_wait_for_ready_too),
    };

    return svc_test_run_group_tests_name("db_verdict", tests, setup, teardown);
}
