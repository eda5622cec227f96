/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - listeners, loop threads, start-up and shutdown (see server.h).
 *
 * Each loop thread owns its h2o context, evloop, listener and connections;
 * the only things the threads share are the read-only h2o configuration,
 * the upstream clients (thread-safe), the metrics (atomics), the stale
 * cache (its own mutex, stale_cache.h) and the front door (door.h: the rate
 * limiter's sharded mutexes, the key set's holder; each loop has its own
 * token cache). The main
 * thread starts, signals and joins them, and in between gives memory the
 * loops have freed back to the kernel ("Freed memory" below).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <h2o.h>
#include <h2o/socket/evloop.h>
#include <h2o/version.h>

#include "adminport.h"
#include "dispatch.h"
#include "door.h"
#include "routes.h"
#include "server.h"

#define LOG_MOD "gateway"
/* After the drain deadline and the cancellations, how long connections may
 * take to close before the process gives up on a clean exit. */
#define GW_FORCE_EXIT_MS 5000
#define GW_ACCEPT_BATCH  16
/* The main thread's look at the closed connections ("Freed memory" below):
 * how often, and how many gone since the last look that asked for a trim
 * are worth one. */
#define GW_MEM_CHECK_MS   1000
#define GW_MEM_TRIM_CONNS 256

typedef struct gw_server gw_server_t;

typedef struct gw_thread {
    gw_loop_t loop; /* first: requests find it through their h2o context */
    gw_server_t *srv;
    int index;
    pthread_t tid;
    int fd; /* the listening socket, until the loop wraps it */
    h2o_socket_t *listener;
    h2o_timeout_entry_t accept_pause; /* linked while accepts wait for descriptors */
    h2o_accept_ctx_t accept;
    h2o_multithread_receiver_t ctl_rx;
    h2o_multithread_message_t stop_msg;
    uint64_t drain_until_ns;
    bool cancelled, done, forced;
} gw_thread_t;

struct gw_server {
    const gw_config_t *cfg;
    gw_app_t app;
    admin_server_t *admin; /* NULL: GATEWAY_ADMIN_LISTEN=none, or not started */
    h2o_globalconf_t conf;
    bool conf_inited;
    gw_thread_t *threads;
    int n_threads, n_started;
    int lock_fd;
    const char *labels[64]; /* metric route labels: the templates */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_ready;
    atomic_size_t peak_conns; /* highest app.n_conns since the last trim asked for */
    atomic_bool capped;       /* at GATEWAY_MAX_CONNECTIONS since the last accept */
};

/* ------------------------------------------------------------------------
 * Listeners and the instance lock
 * ------------------------------------------------------------------------ */

static svc_err_t resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *sl,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    const char *colon = strrchr(listen, ':');
    char host[256];
    struct addrinfo hints, *res = NULL;
    size_t hl;
    long port;
    char *end;
    int rc;

    if (colon == NULL || colon == listen || colon[1] == '\0') {
        svc_errbuf_set(errbuf, "GATEWAY_LISTEN=%s: expected host:port", listen);
        return SVC_EINVAL;
    }
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
        svc_errbuf_set(errbuf, "GATEWAY_LISTEN=%s: the port must be 1-65535", listen);
        return SVC_EINVAL;
    }
    hl = (size_t)(colon - listen);
    if (hl >= 2 && listen[0] == '[' && listen[hl - 1] == ']') {
        listen++;
        hl -= 2;
    }
    if (hl >= sizeof host) {
        svc_errbuf_set(errbuf, "GATEWAY_LISTEN: host too long");
        return SVC_EINVAL;
    }
    memcpy(host, listen, hl);
    host[hl] = '\0';
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0 || res == NULL) {
        svc_errbuf_set(errbuf, "GATEWAY_LISTEN=%s: %s", listen, gai_strerror(rc));
        return SVC_EINVAL;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sl = res->ai_addrlen;
    freeaddrinfo(res);
    return SVC_OK;
}

/* A bound (and, if listen_too, listening) non-blocking socket, or -1. */
static int open_socket(const struct sockaddr_storage *ss, socklen_t sl, bool reuseport,
                       bool listen_too, const char *addr, char errbuf[static SVC_ERRBUF_LEN])
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), on = 1;

    if (fd < 0) {
        svc_errbuf_set(errbuf, "socket: %s", strerror(errno));
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)) {
        svc_errbuf_set(errbuf, "setsockopt: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (bind(fd, (const struct sockaddr *)ss, sl) != 0) {
        int e = errno;
        if (e == EADDRINUSE)
            svc_errbuf_set(errbuf,
                           "cannot listen on %s: address already in use (another "
                           "process, perhaps a gateway, is listening there)",
                           addr);
        else
            svc_errbuf_set(errbuf, "cannot bind %s: %s", addr, strerror(e));
        close(fd);
        return -1;
    }
    if (listen_too && listen(fd, SOMAXCONN) != 0) {
        svc_errbuf_set(errbuf, "cannot listen on %s: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * The lock file: an exclusive flock for the process lifetime (the kernel
 * drops it when the process dies, however it dies). The file holds the pid
 * for the error message and is never removed, so no unlink can race with a
 * starting instance.
 */
static int take_lock(const char *dir, const char *listen, char errbuf[static SVC_ERRBUF_LEN])
{
    char path[1024], name[300], pid[32] = "";
    size_t n = 0;
    int fd, len;
    ssize_t got;

    for (const char *s = listen; *s != '\0' && n + 1 < sizeof name; s++)
        if (*s != '[' && *s != ']')
            name[n++] = (*s == ':' || *s == '/') ? '_' : *s;
    name[n] = '\0';
    len = snprintf(path, sizeof path, "%s/shopmicro-gateway-%s.lock", dir, name);
    if (len < 0 || (size_t)len >= sizeof path) {
        svc_log_warn(LOG_MOD, "GATEWAY_LOCK_DIR is too long: no instance lock");
        return -2;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        /* Not fatal: the probe bind still catches a running instance. */
        svc_log_warn(LOG_MOD, "cannot open the instance lock %s: %s", path, strerror(errno));
        return -2;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        got = pread(fd, pid, sizeof pid - 1, 0);
        pid[got > 0 ? got : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        svc_errbuf_set(errbuf, "another gateway (pid %s) is already serving %s (lock %s)",
                       pid[0] != '\0' ? pid : "?", listen, path);
        close(fd);
        return -1;
    }
    len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        svc_log_warn(LOG_MOD, "cannot write the pid into %s", path);
    return fd;
}

static svc_err_t open_listeners(gw_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    int probe;
    svc_err_t err = resolve(s->cfg->listen, &ss, &sl, errbuf);

    if (err != SVC_OK)
        return err;
    if (strcmp(s->cfg->lock_dir, "none") != 0) {
        s->lock_fd = take_lock(s->cfg->lock_dir, s->cfg->listen, errbuf);
        if (s->lock_fd == -1)
            return SVC_EUNAVAIL;
    }
    /* Without SO_REUSEPORT this bind fails if anything listens there, our
     * own kind included; SO_REUSEADDR keeps TIME_WAIT leftovers of a
     * previous run from failing it. */
    probe = open_socket(&ss, sl, false, false, s->cfg->listen, errbuf);
    if (probe < 0)
        return SVC_EUNAVAIL;
    close(probe);
    for (int i = 0; i < s->n_threads; i++) {
        s->threads[i].fd = open_socket(&ss, sl, true, true, s->cfg->listen, errbuf);
        if (s->threads[i].fd < 0)
            return SVC_EUNAVAIL;
    }
    return SVC_OK;
}

/* ------------------------------------------------------------------------
 * Loop threads
 * ------------------------------------------------------------------------ */

/* h2o's HTTP/1 server leaves a socket's on_close unused (only its client
 * socket pool sets it), so it counts the connections for the trim below. */
static void on_conn_close(void *data)
{
    gw_server_t *s = data;

    atomic_fetch_sub_explicit(&s->app.n_conns, 1, memory_order_relaxed);
}

/* The peak is kept where connections arrive, not sampled by the main
 * thread: a burst opened and closed between two of its checks must still
 * count (it did not, and then no trim followed it). */
static void raise_peak(gw_server_t *s, size_t conns)
{
    size_t peak = atomic_load_explicit(&s->peak_conns, memory_order_relaxed);

    while (conns > peak &&
           !atomic_compare_exchange_weak_explicit(&s->peak_conns, &peak, conns,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

/* ------------------------------------------------------------------------
 * The connection cap, and running out of descriptors
 * ------------------------------------------------------------------------ */

static void on_accept(h2o_socket_t *listener, const char *err);

static void on_accept_pause_end(h2o_timeout_entry_t *entry)
{
    gw_thread_t *t = H2O_STRUCT_FROM_MEMBER(gw_thread_t, accept_pause, entry);

    if (t->listener != NULL)
        h2o_socket_read_start(t->listener, on_accept);
}

/* The waiting connection stays in the backlog and the listener stays
 * readable, so trying again at once would spin the loop at 100 % of a core,
 * serving nobody: the loop stops watching the listener for 100 ms instead,
 * and its open connections go on meanwhile. */
static void pause_listener(gw_thread_t *t, gw_pause_reason_t why)
{
    h2o_socket_read_stop(t->listener);
    h2o_timeout_link(t->loop.ctx.loop, &t->loop.ctx.hundred_ms_timeout, &t->accept_pause);
    gw_metrics_accept_paused(t->srv->app.metrics, why);
}

/* accept() failed for want of descriptors (or kernel memory). One line a
 * second at most. */
static void pause_accepting(gw_thread_t *t, int err)
{
    char kv[96];

    pause_listener(t, GW_PAUSE_DESCRIPTORS);
    snprintf(kv, sizeof kv, " connections=%zu errno=%s",
             atomic_load_explicit(&t->srv->app.n_conns, memory_order_relaxed),
             err == EMFILE   ? "EMFILE"
             : err == ENFILE ? "ENFILE"
                             : "ENOMEM");
    svc_log_write_repeat(SVC_LOG_WARN, LOG_MOD, "accept paused", kv,
                         "cannot accept a connection: %s; new connections wait in the "
                         "listen backlog, accepting again in 100 ms",
                         strerror(err));
}

/* A place under GATEWAY_MAX_CONNECTIONS for the connection about to be
 * accepted, taken before accept() so that the loops together never pass
 * the cap; the new count, or 0 at the cap. */
static size_t take_slot(gw_server_t *s)
{
    size_t n = atomic_load_explicit(&s->app.n_conns, memory_order_relaxed);

    do {
        if (n >= (size_t)s->cfg->max_connections)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&s->app.n_conns, &n, n + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    return n + 1;
}

/* At the cap: new connections wait in the listen backlog (the kernel
 * completes their handshakes there, up to its length) until one closes.
 * One line per pause, from whichever loop finds the cap first, and one
 * when accepting goes on. */
static void pause_at_cap(gw_thread_t *t)
{
    pause_listener(t, GW_PAUSE_CONNECTION_LIMIT);
    if (!atomic_exchange(&t->srv->capped, true))
        svc_log_warn(LOG_MOD,
                     "connection limit: %lld connections open "
                     "(GATEWAY_MAX_CONNECTIONS); new connections wait in the listen "
                     "backlog until one closes",
                     (long long)t->srv->cfg->max_connections);
}

static void resume_after_cap(gw_server_t *s, size_t conns)
{
    if (atomic_load_explicit(&s->capped, memory_order_relaxed) &&
        atomic_exchange(&s->capped, false))
        svc_log_info(LOG_MOD, "connection limit: accepting again (%zu connections open)", conns);
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    gw_thread_t *t = listener->data;

    if (err != NULL)
        return;
    /* Several per wake-up, but bounded, so one busy listener cannot starve
     * the connections this loop already has. */
    for (int i = 0; i < GW_ACCEPT_BATCH; i++) {
        size_t conns = take_slot(t->srv);
        h2o_socket_t *sock;
        int on = 1;

        if (conns == 0) {
            /* After an accept, whether another waits is unknown: the
             * listener, level-triggered, calls again if one does. */
            if (i == 0)
                pause_at_cap(t);
            return;
        }
        sock = h2o_evloop_socket_accept(listener);
        if (sock == NULL) {
            int e = errno;

            atomic_fetch_sub_explicit(&t->srv->app.n_conns, 1, memory_order_relaxed);
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM)
                pause_accepting(t, e == ENOBUFS ? ENOMEM : e);
            return;
        }
        resume_after_cap(t->srv, conns);
        setsockopt(h2o_socket_get_fd(sock), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        raise_peak(t->srv, conns);
        sock->on_close.cb = on_conn_close;
        sock->on_close.data = t->srv;
        h2o_accept(&t->accept, sock);
    }
}

static void begin_stop(gw_thread_t *t)
{
    if (t->loop.stopping)
        return;
    t->loop.stopping = true;
    if (h2o_timeout_is_linked(&t->accept_pause))
        h2o_timeout_unlink(&t->accept_pause);
    h2o_socket_read_stop(t->listener);
    h2o_socket_close(t->listener);
    t->listener = NULL;
    /* What h2o_context_request_shutdown does for HTTP/1 (new requests get
     * Connection: close), without its HTTP/2 part, which arms a one-second
     * GOAWAY timer that h2o_context_dispose would then find still linked. */
    t->loop.ctx.shutdown_requested = 1;
    /* h2o 2.2.5 keeps an idle keep-alive connection open until its request
     * timeout fires; with a zero timeout every idle one closes at the next
     * loop iteration, and each busy one as soon as it has been answered. */
    t->loop.ctx.http1.req_timeout.timeout = 0;
    t->drain_until_ns = svc_now_ns() + (uint64_t)t->srv->cfg->drain_ms * SVC_NS_PER_MS;
}

static void on_ctl(h2o_multithread_receiver_t *rx, h2o_linklist_t *msgs)
{
    gw_thread_t *t = H2O_STRUCT_FROM_MEMBER(gw_thread_t, ctl_rx, rx);

    while (!h2o_linklist_is_empty(msgs))
        h2o_linklist_unlink(msgs->next);
    begin_stop(t);
}

static void check_drain(gw_thread_t *t)
{
    uint64_t now;

    if (t->loop.n_pending == 0 && h2o_linklist_is_empty(&t->loop.ctx.http1._conns)) {
        t->done = true;
        return;
    }
    now = svc_now_ns();
    if (!t->cancelled && now >= t->drain_until_ns) {
        size_t n = gw_loop_cancel_pending(&t->loop);
        t->cancelled = true;
        if (n > 0)
            svc_log_warn(LOG_MOD,
                         "loop %d: drain timed out after %lld ms: cancelling %zu "
                         "in-flight calls",
                         t->index, (long long)t->srv->cfg->drain_ms, n);
    }
    if (now >= t->drain_until_ns + (uint64_t)GW_FORCE_EXIT_MS * SVC_NS_PER_MS) {
        svc_log_error(LOG_MOD,
                      "loop %d: %zu calls and some connections still open %d ms after "
                      "the drain: giving up on a clean exit",
                      t->index, t->loop.n_pending, GW_FORCE_EXIT_MS);
        t->forced = true;
        t->done = true;
    }
}

#if H2O_VERSION_MAJOR == 2 && H2O_VERSION_MINOR <= 2
/*
 * h2o 2.2 keeps freed pool chunks and socket buffers in per-thread recycle
 * lists (up to 16 each) and has no call to empty them. When a loop thread
 * exits they become unreachable, which LeakSanitizer rightly reports. This
 * empties both lists on the thread that owns them, after its last request:
 * the socket buffers through their public prototype, the pool chunks by
 * drawing every cached chunk into a scratch pool (four 1008-byte
 * allocations fill one 4 KiB chunk) and freeing the chunks directly. It
 * relies on h2o 2.2's chunk layout (the link is the first member), hence
 * the version check.
 */
static void release_thread_caches(void)
{
    h2o_mem_recycle_t *bufs = &h2o_socket_buffer_prototype.allocator;
    h2o_mem_pool_t pool;
    void *chunk;

    while (bufs->cnt > 0)
        free(h2o_mem_alloc_recycle(bufs, 0));
    h2o_mem_init_pool(&pool);
    for (int i = 0; i < 4 * 17; i++)
        h2o_mem_alloc_pool(&pool, 1008);
    for (chunk = pool.chunks; chunk != NULL;) {
        void *next = *(void **)chunk;
        free(chunk);
        chunk = next;
    }
}
#else
static void release_thread_caches(void)
{
}
#endif

static void *loop_main(void *arg)
{
    gw_thread_t *t = arg;
    gw_server_t *s = t->srv;
    h2o_evloop_t *ev = h2o_evloop_create();

    h2o_context_init(&t->loop.ctx, ev, &s->conf);
    gw_loop_dispatch_init(&t->loop, &s->app);
    t->loop.lane = (unsigned)t->index;
    h2o_multithread_register_receiver(t->loop.ctx.queue, &t->ctl_rx, on_ctl);
    t->accept.ctx = &t->loop.ctx;
    t->accept.hosts = s->conf.hosts;
    t->listener = h2o_evloop_socket_create(ev, t->fd, H2O_SOCKET_FLAG_DONT_READ);
    t->fd = -1; /* the socket owns it now */
    t->listener->data = t;
    t->accept_pause.cb = on_accept_pause_end;
    h2o_socket_read_start(t->listener, on_accept);

    pthread_mutex_lock(&s->mu);
    s->n_ready++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);

    while (!t->done) {
        /* While draining, wake up regularly to check the drain's progress. */
        h2o_evloop_run(ev, t->loop.stopping ? 10 : INT32_MAX);
        if (t->loop.stopping)
            check_drain(t);
    }
    if (t->forced)
        return NULL; /* h2o cannot be torn down with connections open */
    gw_loop_dispatch_dispose(&t->loop);
    h2o_multithread_unregister_receiver(t->loop.ctx.queue, &t->ctl_rx);
    h2o_context_dispose(&t->loop.ctx);
#if H2O_VERSION_MAJOR == 2 && H2O_VERSION_MINOR <= 2
    /* h2o 2.2's h2o_multithread_destroy_queue closes the queue but never
     * frees it (fixed in 2.3). */
    free(t->loop.ctx.queue);
#endif
    h2o_evloop_destroy(ev);
    release_thread_caches();
    return NULL;
}

/* ------------------------------------------------------------------------
 * Freed memory
 * ------------------------------------------------------------------------ */

/*
 * Every service gives freed heap back to the kernel through pkg/core's
 * trimmer (svc_mem_start in main; svc/core.h, "Freed memory"), which trims
 * once 1 MiB more of the resident memory is not allocated. The gateway adds
 * one rule of its own: GW_MEM_TRIM_CONNS connections gone from their highest
 * count since the last request. Their state is spread thinly over many pages
 * (2,000 connections with one request each take 17 MB -> 60 MB; after they
 * have closed 1.2 MB is in use, and freeing 2.6 MB of it freed 8 MB of
 * pages), which the byte rule would see only once the pages add up.
 */
static void conns_check(gw_server_t *s)
{
    size_t conns = atomic_load_explicit(&s->app.n_conns, memory_order_relaxed);
    size_t peak = atomic_load_explicit(&s->peak_conns, memory_order_relaxed);

    if (peak < conns || peak - conns < GW_MEM_TRIM_CONNS)
        return;
    svc_log_debug(LOG_MOD, "%zu connections gone (%zu open, %zu at most): asking for a trim",
                  peak - conns, conns, peak);
    svc_mem_trim_soon();
    atomic_store_explicit(&s->peak_conns, conns, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * The process
 * ------------------------------------------------------------------------ */

/* Waits for SIGTERM/SIGINT, checking the closed connections once per
 * GW_MEM_CHECK_MS, dropping stale answers past their bound, reloading a
 * changed key set file and writing the counts of repeated 5xx lines whose
 * key has gone quiet. */
static void wait_for_signal(gw_server_t *s)
{
    const struct timespec tick = {GW_MEM_CHECK_MS / 1000, (GW_MEM_CHECK_MS % 1000) * 1000000L};
    sigset_t set;
    int sig;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    for (;;) {
        sig = sigtimedwait(&set, NULL, &tick);
        if (sig >= 0)
            break;
        if (errno == EAGAIN) {
            if (s->app.stale != NULL)
                gw_cache_expire(s->app.stale);
            gw_door_tick(s->app.door);
            conns_check(s);
            svc_log_repeats_flush(svc_log_repeats_default(), false);
        }
    }
    svc_log_repeats_flush(svc_log_repeats_default(), true);
    svc_log_info(LOG_MOD, "received %s: shutting down (drain up to %lld ms)",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)s->cfg->drain_ms);
}

static svc_err_t start(gw_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    h2o_hostconf_t *host;
    svc_err_t err;

    if (gw_n_routes > SVC_COUNTOF(s->labels)) {
        svc_errbuf_set(errbuf, "too many routes");
        return SVC_EINVAL;
    }
    err = gw_routes_validate(gw_routes, gw_n_routes, errbuf);
    if (err != SVC_OK)
        return err;
    s->threads = calloc((size_t)s->n_threads, sizeof *s->threads);
    if (s->threads == NULL)
        return SVC_ENOMEM;
    for (int i = 0; i < s->n_threads; i++) {
        s->threads[i].fd = -1;
        s->threads[i].index = i;
        s->threads[i].srv = s;
    }
    err = open_listeners(s, errbuf);
    if (err != SVC_OK)
        return err;
    err = gw_upstreams_new(s->cfg, gw_routes, gw_n_routes, &s->app.ups, errbuf);
    if (err != SVC_OK)
        return err;
    err = gw_door_new(s->cfg, gw_routes, gw_n_routes, &s->app.door, errbuf);
    if (err != SVC_OK)
        return err;
    for (int i = 0; i < s->n_threads; i++) /* before the loops start: none is shared */
        if (gw_door_loop_new(s->app.door, &s->threads[i].loop.auth) != SVC_OK)
            return SVC_ENOMEM;
    for (size_t i = 0; i < gw_n_routes; i++)
        s->labels[i] = gw_routes[i].pattern;
    err = gw_metrics_new(s->labels, gw_n_routes, &s->app.metrics);
    if (err != SVC_OK)
        return err;
    if (s->cfg->stale_reads) {
        gw_cache_opts_t co;

        gw_cache_opts_init(&co);
        co.max_age_ms = (uint64_t)s->cfg->stale_max_age_ms;
        co.max_entries = (size_t)s->cfg->stale_max_entries;
        co.max_bytes = (size_t)s->cfg->stale_max_bytes;
        err = gw_cache_new(&co, &s->app.stale);
        if (err != SVC_OK) {
            svc_errbuf_set(errbuf, "cannot make the stale-read cache: %s", svc_strerror(err));
            return err;
        }
    }

    h2o_config_init(&s->conf);
    s->conf_inited = true;
    s->conf.server_name = h2o_iovec_init(H2O_STRLIT("")); /* like Go: no Server header */
    s->conf.max_request_entity_size = (size_t)s->cfg->max_body_bytes;
    s->conf.http1.req_timeout = (uint64_t)s->cfg->idle_timeout_ms;
    s->conf.http1.upgrade_to_http2 = 0; /* HTTP/1.1 only, as the Go gateway without TLS */
    host = h2o_config_register_host(&s->conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    gw_dispatch_register(host, &s->app);

    for (; s->n_started < s->n_threads; s->n_started++) {
        gw_thread_t *t = &s->threads[s->n_started];
        if (pthread_create(&t->tid, NULL, loop_main, t) != 0) {
            svc_errbuf_set(errbuf, "cannot start loop threads: %s", strerror(errno));
            return SVC_ENOMEM;
        }
    }
    pthread_mutex_lock(&s->mu);
    while (s->n_ready < s->n_threads)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    err = gw_admin_start(&s->app, &s->admin, errbuf);
    if (err != SVC_OK)
        return err;
    return SVC_OK;
}

/* Stops and joins the loops that were started; true when all were clean. */
static bool stop_loops(gw_server_t *s)
{
    bool clean = true;

    atomic_store(&s->app.draining, true);
    pthread_mutex_lock(&s->mu);
    while (s->n_ready < s->n_started) /* a failed start may leave some booting */
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_started; i++)
        h2o_multithread_send_message(&s->threads[i].ctl_rx, &s->threads[i].stop_msg);
    for (int i = 0; i < s->n_started; i++) {
        pthread_join(s->threads[i].tid, NULL);
        clean = clean && !s->threads[i].forced;
    }
    return clean;
}

static void cleanup(gw_server_t *s, bool loops_clean)
{
    /* First: its callbacks read the upstreams, the metrics and the cache. */
    admin_server_free(s->admin);
    s->admin = NULL;
    if (s->threads != NULL)
        for (int i = 0; i < s->n_threads; i++)
            if (s->threads[i].fd >= 0)
                close(s->threads[i].fd);
    /* A loop that gave up still references the upstreams and h2o's
     * configuration: leave them to the process exit. */
    if (loops_clean) {
        if (s->threads != NULL)
            for (int i = 0; i < s->n_threads; i++)
                gw_auth_loop_free(s->threads[i].loop.auth);
        gw_door_free(s->app.door);
        gw_upstreams_free(s->app.ups);
        gw_metrics_free(s->app.metrics);
        gw_cache_free(s->app.stale);
        if (s->conf_inited)
            h2o_config_dispose(&s->conf);
        free(s->threads);
    }
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

int gw_server_run(const gw_config_t *cfg)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_server_t s;
    svc_err_t err;
    bool clean;

    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.n_threads = (int)cfg->threads;
    s.lock_fd = -1;
    s.app.cfg = cfg;
    atomic_init(&s.app.draining, false);
    atomic_init(&s.app.n_conns, 0);
    atomic_init(&s.peak_conns, 0);
    atomic_init(&s.capped, false);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);

    err = start(&s, errbuf);
    if (err != SVC_OK) {
        svc_log_error(LOG_MOD, "cannot start: %s", errbuf);
        clean = stop_loops(&s);
        cleanup(&s, clean);
        return 1;
    }
    svc_log_info(LOG_MOD, "listening on %s with %d threads (catalog %s, order %s; admin %s)",
                 cfg->listen, s.n_threads, cfg->catalog_addr, cfg->order_addr, cfg->admin_listen);
    wait_for_signal(&s);
    clean = stop_loops(&s);
    cleanup(&s, clean);
    svc_log_info(LOG_MOD, "stopped%s", clean ? " after a clean drain" : " without a clean drain");
    return clean ? 0 : 1;
}
