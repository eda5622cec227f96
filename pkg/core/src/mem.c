/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem.c - freed heap given back to the kernel, for every long-running
 * program (svc/core.h, "Freed memory"; docs/operations.md, "Memory").
 *
 * Why. Under load every service frees almost all it allocates, yet its RSS
 * stayed above what it was before: glibc keeps freed chunks in its arenas,
 * and an arena shrinks only from its top, so a few chunks still in use high
 * in an arena keep the free pages below them resident. After a burst the
 * catalog held 9.7 MB of arenas with 1.3 MB in use (malloc_stats), and
 * malloc_trim(0) took its RSS from 28.2 to 22.2 MB; valgrind finds no leak.
 * The gateway met it first (2,000 connections: 17 -> 60 MB, and it stayed;
 * docs/gateway.md, "Memory"), and its fix is this one, moved here so that
 * each service has it.
 *
 * What. At start, before any thread exists:
 *  - M_ARENA_MAX (<PREFIX>_MALLOC_ARENAS, default 1): malloc_trim(0) gives
 *    back the free pages inside every arena, but shrinks only the main
 *    arena's top (glibc 2.36's mtrim calls systrim for the main arena
 *    alone); the free top of a thread's arena is given back only by a large
 *    free() in that arena. With one arena every thread allocates from the
 *    main one, whose top the trim gives back. gRPC, libpq and librdkafka
 *    threads share its lock when their thread caches miss; on the gateway's
 *    load that cost nothing measurable (docs/gateway.md, "Memory").
 *  - M_MMAP_THRESHOLD fixed at glibc's initial 128 KiB: glibc raises the
 *    threshold (up to 32 MiB) each time an mmap'd chunk is freed, and the
 *    trim threshold with it (up to 64 MiB), after which large buffers (a
 *    page of products, a Kafka fetch) live in the arena and its top stays
 *    resident below that threshold. Setting it turns the adjustment off.
 * Then a thread of its own (signals blocked: it must never take a SIGTERM
 * meant for the program's own wait) checks once a second and calls
 * malloc_trim(0) when the resident memory malloc does not count as
 * allocated (RSS minus mallinfo2's uordblks + hblkhd) has grown by
 * SVC_MEM_TRIM_BYTES above its lowest point since the last trim, or a
 * program asked for one (svc_mem_trim_soon: the gateway, when many
 * connections have closed), and at most once per SVC_MEM_TRIM_GAP_MS.
 * While the allocated bytes still fall by more than SVC_MEM_SETTLE_BYTES
 * from one check to the next, a burst is ending and more is about to be
 * freed: the trim waits, for at most SVC_MEM_SETTLE_CHECKS checks.
 *
 * Cost. A check is a read of /proc/self/statm and a mallinfo2, which walks
 * the free lists: 0.07-0.3 ms, once a second. A trim took 0.6-25 ms for
 * 5-60 MB in the gateway; it locks one arena at a time, so an allocation
 * that misses its thread cache meanwhile waits for it (docs/gateway.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "svc/core.h"

#define SVC_MEM_CHECK_MS      1000
#define SVC_MEM_TRIM_BYTES    ((size_t)1 << 20)
#define SVC_MEM_TRIM_GAP_MS   10000
#define SVC_MEM_SETTLE_BYTES  ((size_t)1 << 20)
#define SVC_MEM_SETTLE_CHECKS 5
#define SVC_MEM_LOG_BYTES     ((size_t)4 << 20)

/* One per process: malloc's state is the process's. */
static struct {
    const char *module;
    pthread_t tid;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* svc_mem_stop's wake-up */
    bool stopping;      /* under mu */
    atomic_bool wanted; /* svc_mem_trim_soon */
    size_t low_idle;    /* lowest RSS - allocated since the last trim (or the start) */
    size_t in_use;      /* allocated bytes at the previous check */
    int deferred;       /* checks a wanted trim has waited for the heap to settle */
    uint64_t last_ns;   /* end of the last trim */
} mem = {.mu = PTHREAD_MUTEX_INITIALIZER};

size_t svc_mem_rss_bytes(void)
{
    char buf[128];
    unsigned long long size = 0, resident = 0;
    ssize_t n;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Resident bytes that malloc does not count as allocated. */
static size_t idle_bytes(size_t rss, size_t *in_use)
{
    struct mallinfo2 mi = mallinfo2();

    *in_use = mi.uordblks + mi.hblkhd; /* arena chunks in use + mmap'd chunks */
    return rss > *in_use ? rss - *in_use : 0;
}

static void check(void)
{
    uint64_t now = svc_now_ns(), t0, t1;
    size_t rss = svc_mem_rss_bytes(), in_use, idle, rss_after;
    bool settling, asked;

    if (rss == 0)
        return;
    idle = idle_bytes(rss, &in_use);
    settling = mem.in_use > in_use + SVC_MEM_SETTLE_BYTES;
    mem.in_use = in_use;
    if (idle < mem.low_idle)
        mem.low_idle = idle;
    asked = atomic_load_explicit(&mem.wanted, memory_order_relaxed);
    if (now - mem.last_ns < (uint64_t)SVC_MEM_TRIM_GAP_MS * SVC_NS_PER_MS ||
        (idle - mem.low_idle < SVC_MEM_TRIM_BYTES && !asked)) {
        mem.deferred = 0;
        return;
    }
    if (settling && ++mem.deferred < SVC_MEM_SETTLE_CHECKS)
        return;
    mem.deferred = 0;
    atomic_store_explicit(&mem.wanted, false, memory_order_relaxed);
    t0 = svc_now_ns();
    malloc_trim(0);
    t1 = svc_now_ns();
    rss_after = svc_mem_rss_bytes();
    SVC_LOG(rss > rss_after && rss - rss_after >= SVC_MEM_LOG_BYTES ? SVC_LOG_INFO : SVC_LOG_DEBUG,
            mem.module,
            "returned freed heap to the kernel: RSS %.1f -> %.1f MiB (%.1f MiB allocated%s); "
            "malloc_trim took %.2f ms",
            (double)rss / 1048576.0, (double)rss_after / 1048576.0, (double)in_use / 1048576.0,
            asked ? ", asked for" : "", (double)(t1 - t0) / 1e6);
    mem.low_idle = idle_bytes(rss_after, &mem.in_use);
    mem.last_ns = t1;
}

static void *trimmer(void *arg)
{
    struct timespec until;

    (void)arg;
    /* The baseline is taken now, as the program begins to serve: a burst
     * that has come and gone within the first second must not become the
     * lowest point. */
    mem.low_idle = idle_bytes(svc_mem_rss_bytes(), &mem.in_use);
    pthread_mutex_lock(&mem.mu);
    while (!mem.stopping) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += SVC_MEM_CHECK_MS / 1000;
        until.tv_nsec += (SVC_MEM_CHECK_MS % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&mem.cv, &mem.mu, &until) == ETIMEDOUT && !mem.stopping) {
            pthread_mutex_unlock(&mem.mu);
            check();
            pthread_mutex_lock(&mem.mu);
        }
    }
    pthread_mutex_unlock(&mem.mu);
    return NULL;
}

svc_err_t svc_mem_start(const svc_mem_cfg_t *cfg, const char *module)
{
    pthread_condattr_t ca;
    sigset_t all, was;
    int rc;

    mem.module = module;
    if (cfg->arenas > 0 && mallopt(M_ARENA_MAX, (int)cfg->arenas) != 1)
        svc_log_warn(module, "mallopt(M_ARENA_MAX) failed: freed heap may stay resident");
    if (mallopt(M_MMAP_THRESHOLD, 128 * 1024) != 1)
        svc_log_warn(module, "mallopt(M_MMAP_THRESHOLD) failed: freed heap may stay resident");
    if (!cfg->trim || mem.running)
        return SVC_OK;
    /* The wait's deadline is on the monotonic clock: a wall-clock step must
     * neither stall the checks nor run them back to back. */
    if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&mem.cv, &ca) != 0)
        return SVC_ENOMEM;
    pthread_condattr_destroy(&ca);
    mem.stopping = false;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &was);
    rc = pthread_create(&mem.tid, NULL, trimmer, NULL);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (rc != 0) {
        svc_log_warn(module, "cannot start the heap trimmer: %s", strerror(rc));
        return SVC_ENOMEM;
    }
    mem.running = true;
    return SVC_OK;
}

void svc_mem_trim_soon(void)
{
    atomic_store_explicit(&mem.wanted, true, memory_order_relaxed);
}

void svc_mem_stop(void)
{
    if (!mem.running)
        return;
    pthread_mutex_lock(&mem.mu);
    mem.stopping = true;
    pthread_cond_signal(&mem.cv);
    pthread_mutex_unlock(&mem.mu);
    pthread_join(mem.tid, NULL);
    mem.running = false;
}
