/* SPDX-License-Identifier: Apache-2.0 */
/* mq_it.c - the test's own RabbitMQ node, and raw looks at its queues (mq_it.h). */
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "internal.h"
#include "mq_it.h"
#include "support/spawn.h"

/* rabbitmq.sh waits up to 60 s for a start; a loaded machine may need it. */
#define VERB_MS 120000

static const char *need_env(const char *name)
{
    const char *v = getenv(name);

    if (v == NULL || v[0] == '\0') {
        fprintf(stderr, "%s is not set: run this test through ctest\n", name);
        exit(2);
    }
    return v;
}

int mq_it_ms(int ms)
{
    const char *m = getenv("SVC_TEST_TIMEOUT_MULTIPLIER");
    int k = m != NULL ? atoi(m) : 1;

    return ms * (k > 0 ? k : 1);
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
    spawn_log_path_make("rabbitmq.sh", log, sizeof log);
    o.log_path = log;
    err = spawn_run(&o, timeout_ms, &wstatus, errbuf);
    if (err == SVC_OK && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
        return SVC_OK;
    spawn_status_text(wstatus, st, sizeof st);
    fprintf(stderr, "%s %s: %s %s (output in %s)\n", argv[1], argv[2],
            err == SVC_OK ? st : svc_err_name(err), errbuf, log);
    return err == SVC_OK ? SVC_EINTERNAL : err;
}

/* Three ports below the ephemeral range from the stack's free_ports, none
 * of RabbitMQ's usual or the stack's defaults. */
static int pick_ports(mq_it_node_t *n)
{
    char cmd[1024];
    FILE *f;
    int ok;

    snprintf(cmd, sizeof cmd,
             "bash -c 'source \"$1\" >/dev/null 2>&1 && free_ports 3 5672 4369 25672 25772 25773 "
             "24369' _ %s/stack.sh 2>/dev/null",
             need_env("MQ_IT_STACK_DIR"));
    f = popen(cmd, "r");
    ok = f != NULL && fscanf(f, "%d %d %d", &n->port, &n->dist_port, &n->epmd_port) == 3 &&
         n->port > 0 && n->dist_port > 0 && n->epmd_port > 0;
    if (f != NULL)
        pclose(f);
    return ok ? 0 : -1;
}

static void remove_run_dir(void)
{
    const char *argv[] = {"/bin/rm", "-rf", "--", need_env("MQ_IT_RUN_DIR"), NULL};

    (void)run(argv, NULL, 30000);
}

svc_err_t mq_it_node(mq_it_node_t *n, const char *verb, double *secs)
{
    char run_dir[600], port[64], dport[64], eport[64];
    const char *env[] = {run_dir, port, dport, eport, NULL};
    const char *argv[] = {"/bin/bash", need_env("MQ_IT_RABBITMQ_SH"), verb, NULL};
    uint64_t t0 = svc_now_ms();
    svc_err_t err;

    if (n->port == 0) {
        if (pick_ports(n) != 0) {
            fprintf(stderr, "mq_it: no free ports from free_ports\n");
            return SVC_EUNAVAIL;
        }
        remove_run_dir();
    }
    snprintf(run_dir, sizeof run_dir, "SHOPMICRO_RUN_DIR=%s", need_env("MQ_IT_RUN_DIR"));
    snprintf(port, sizeof port, "SHOPMICRO_RABBITMQ_PORT=%d", n->port);
    snprintf(dport, sizeof dport, "SHOPMICRO_RABBITMQ_DIST_PORT=%d", n->dist_port);
    snprintf(eport, sizeof eport, "SHOPMICRO_RABBITMQ_EPMD_PORT=%d", n->epmd_port);
    err = run(argv, env, mq_it_ms(VERB_MS));
    if (secs != NULL)
        *secs = (double)(svc_now_ms() - t0) / 1000.0;
    return err;
}

void mq_it_node_cleanup(mq_it_node_t *n)
{
    if (n->port != 0)
        (void)mq_it_node(n, "stop", NULL);
    remove_run_dir();
}

void mq_it_conn_opts(const mq_it_node_t *n, rmq_conn_opts_t *o)
{
    rmq_conn_opts_init(o);
    o->port = n->port;
    o->connect_timeout_ms = mq_it_ms(5000);
    o->io_timeout_ms = mq_it_ms(5000);
    o->name = "mq-it";
}

/* A raw connection: the looks below must not depend on the module. */
static amqp_connection_state_t raw_open(const mq_it_node_t *n)
{
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    struct timeval tv = {.tv_sec = 5};
    amqp_rpc_reply_t r;

    amqp_set_rpc_timeout(c, &tv);
    if (s == NULL || amqp_socket_open_noblock(s, "127.0.0.1", n->port, &tv) != AMQP_STATUS_OK)
        goto fail;
    r = amqp_login(c, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        goto fail;
    amqp_channel_open(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        goto fail;
    return c;
fail:
    fprintf(stderr, "mq_it: cannot connect to 127.0.0.1:%d\n", n->port);
    amqp_destroy_connection(c);
    return NULL;
}

static void raw_close(amqp_connection_state_t c)
{
    (void)amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
    (void)amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
}

long mq_it_depth(const mq_it_node_t *n, const char *queue)
{
    amqp_connection_state_t c = raw_open(n);
    amqp_queue_declare_ok_t *ok;
    long depth = -1;

    if (c == NULL)
        return -1;
    ok = amqp_queue_declare(c, 1, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
    if (ok != NULL)
        depth = (long)ok->message_count;
    else
        fprintf(stderr, "mq_it: queue %s: passive declare failed\n", queue);
    raw_close(c);
    return depth;
}

static void header_text(const amqp_basic_properties_t *p, const char *name, char *out)
{
    const amqp_field_value_t *v =
        (p->_flags & AMQP_BASIC_HEADERS_FLAG) ? rmq__table_get(&p->headers, name) : NULL;

    out[0] = '\0';
    if (v != NULL)
        (void)rmq__field_text(v, out, RMQ_HEADER_VALUE_MAX);
}

int mq_it_get(const mq_it_node_t *n, const char *queue, char *msg_id, size_t id_cap,
              const char *const *hdr_names, char (*hdr_values)[RMQ_HEADER_VALUE_MAX], size_t n_hdrs)
{
    amqp_connection_state_t c = raw_open(n);
    amqp_rpc_reply_t r;
    amqp_message_t m;
    int rc = -1;

    if (c == NULL)
        return -1;
    r = amqp_basic_get(c, 1, amqp_cstring_bytes(queue), 1);
    if (r.reply_type != AMQP_RESPONSE_NORMAL || r.reply.id != AMQP_BASIC_GET_OK_METHOD) {
        fprintf(stderr, "mq_it: basic.get from %s: nothing there\n", queue);
        goto out;
    }
    r = amqp_read_message(c, 1, &m, 0);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        goto out;
    snprintf(msg_id, id_cap, "%.*s", (int)m.properties.message_id.len,
             (const char *)m.properties.message_id.bytes);
    for (size_t i = 0; i < n_hdrs; i++)
        header_text(&m.properties, hdr_names[i], hdr_values[i]);
    amqp_destroy_message(&m);
    rc = 0;
out:
    raw_close(c);
    return rc;
}
