/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn.c - child processes for integration tests (see spawn.h).
 *
 * fork+execve rather than posix_spawn, for two things posix_spawn cannot do:
 * PR_SET_PDEATHSIG in the child, and reporting an execve failure through a
 * close-on-exec pipe. The test process is multi-threaded (gRPC), so the
 * child runs only async-signal-safe calls between fork and execve:
 * everything it needs (argv, envp, file descriptors) is built beforehand.
 */
#define _GNU_SOURCE /* pipe2, strsignal */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/spawn.h"

extern char **environ;

struct spawn_proc {
    pid_t pid;
    bool reaped;
    int wstatus;
    char log_path[PATH_MAX];
};

/* Poll intervals: start short so fast events are seen at once, then back
 * off so a long wait does not spin. */
#define POLL_FIRST_NS (1 * 1000 * 1000)
#define POLL_MAX_NS   (20 * 1000 * 1000)

static void pause_ns(uint64_t *interval_ns)
{
    struct timespec ts = {0, (long)*interval_ns};

    nanosleep(&ts, NULL);
    *interval_ns = *interval_ns * 2 > POLL_MAX_NS ? POLL_MAX_NS : *interval_ns * 2;
}

void spawn_opts_init(spawn_opts_t *o)
{
    memset(o, 0, sizeof *o);
}

static void mkdir_p(const char *dir)
{
    char tmp[PATH_MAX];

    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

void spawn_log_path_make(const char *name, char *buf, size_t len)
{
    static atomic_uint counter;
    const char *dir = getenv("SVC_TEST_LOG_DIR");
    const char *base = strrchr(name, '/');

    if (dir == NULL || dir[0] == '\0')
        dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    mkdir_p(dir);
    snprintf(buf, len, "%s/%s-%d-%u.log", dir, base != NULL ? base + 1 : name, (int)getpid(),
             atomic_fetch_add(&counter, 1) + 1);
}

/* Length of the NAME part of "NAME=VALUE" (or of "NAME"). */
static size_t env_name_len(const char *e)
{
    const char *eq = strchr(e, '=');
    return eq != NULL ? (size_t)(eq - e) : strlen(e);
}

static bool env_overridden(const char *e, const char *const *extra)
{
    size_t n = env_name_len(e);

    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        if (env_name_len(extra[i]) == n && strncmp(e, extra[i], n) == 0)
            return true;
    return false;
}

/* The child's environment: ours minus overridden names, plus the extras
 * that have a value (of several with one name, the last). Pointers are
 * borrowed from environ and o->env. */
static char **build_env(const char *const *extra)
{
    size_t n_env = 0, n_extra = 0, k = 0;
    char **envp;

    while (environ[n_env] != NULL)
        n_env++;
    while (extra != NULL && extra[n_extra] != NULL)
        n_extra++;
    envp = calloc(n_env + n_extra + 1, sizeof *envp);
    if (envp == NULL)
        return NULL;
    for (size_t i = 0; i < n_env; i++)
        if (!env_overridden(environ[i], extra))
            envp[k++] = environ[i];
    for (size_t i = 0; i < n_extra; i++)
        if (strchr(extra[i], '=') != NULL && !env_overridden(extra[i], extra + i + 1))
            envp[k++] = (char *)extra[i];
    envp[k] = NULL;
    return envp;
}

/* Between fork and execve: async-signal-safe calls only. */
static void child(const char *path, char *const *argv, char *const *envp, int devnull, int log,
                  int errpipe, pid_t parent)
{
    struct sigaction dfl;
    sigset_t none;
    int e;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before prctl took effect */
        _exit(127);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL); /* SIG_IGN (SIGPIPE) would survive execve */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(devnull, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
        goto fail;
    execve(path, argv, envp);
fail:
    e = errno;
    (void)!write(errpipe, &e, sizeof e);
    _exit(127);
}

svc_err_t spawn_start(const spawn_opts_t *o, spawn_proc_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *default_argv[2] = {o->path, NULL};
    const char *const *argv = o->argv != NULL ? o->argv : default_argv;
    spawn_proc_t *p = calloc(1, sizeof *p);
    char **envp = NULL;
    int devnull = -1, log = -1, pipefd[2] = {-1, -1}, child_errno = 0;
    pid_t parent = getpid();
    svc_err_t err = SVC_EINTERNAL;
    ssize_t n;

    if (p == NULL || o->path == NULL) {
        svc_errbuf_set(errbuf, "spawn_start: %s", p == NULL ? "out of memory" : "no path");
        err = p == NULL ? SVC_ENOMEM : SVC_EINVAL;
        goto out;
    }
    if (o->log_path != NULL)
        snprintf(p->log_path, sizeof p->log_path, "%s", o->log_path);
    else
        spawn_log_path_make(o->path, p->log_path, sizeof p->log_path);
    envp = build_env(o->env);
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    log = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (envp == NULL || devnull < 0 || log < 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        svc_errbuf_set(errbuf, "spawn_start: cannot prepare %s: %s", p->log_path, strerror(errno));
        goto out;
    }
    p->pid = fork();
    if (p->pid < 0) {
        svc_errbuf_set(errbuf, "spawn_start: fork: %s", strerror(errno));
        goto out;
    }
    if (p->pid == 0)
        child(o->path, (char *const *)argv, envp, devnull, log, pipefd[1], parent);
    close(pipefd[1]);
    pipefd[1] = -1;
    /* EOF means execve succeeded (the pipe closed on exec). */
    do
        n = read(pipefd[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof child_errno) {
        waitpid(p->pid, NULL, 0);
        svc_errbuf_set(errbuf, "cannot execute %s: %s", o->path, strerror(child_errno));
        err = SVC_EINVAL;
        goto out;
    }
    *out = p;
    p = NULL;
    err = SVC_OK;
out:
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (log >= 0)
        close(log);
    if (devnull >= 0)
        close(devnull);
    free(envp);
    free(p);
    return err;
}

pid_t spawn_pid(const spawn_proc_t *p)
{
    return p->pid;
}

const char *spawn_log_path(const spawn_proc_t *p)
{
    return p->log_path;
}

/* Reaps the child without blocking; true once it has exited. */
static bool reap(spawn_proc_t *p)
{
    int st;
    pid_t r;

    if (p->reaped)
        return true;
    do
        r = waitpid(p->pid, &st, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == p->pid || (r < 0 && errno == ECHILD)) {
        p->reaped = true;
        p->wstatus = r == p->pid ? st : -1;
    }
    return p->reaped;
}

bool spawn_alive(spawn_proc_t *p)
{
    return !reap(p);
}

bool spawn_stopped(spawn_proc_t *p)
{
    char path[64], buf[512], *state;
    FILE *f;
    size_t n;

    if (reap(p))
        return false;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)p->pid);
    f = fopen(path, "r");
    if (f == NULL)
        return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may contain spaces and parentheses. */
    state = strrchr(buf, ')');
    /* 'T' is a signal stop; 't' (a ptrace stop) is deliberately not one. */
    return state != NULL && state[1] == ' ' && state[2] == 'T';
}

svc_err_t spawn_signal(spawn_proc_t *p, int sig)
{
    if (reap(p))
        return SVC_EINVAL;
    return kill(p->pid, sig) == 0 ? SVC_OK : SVC_EINVAL;
}

svc_err_t spawn_wait_exit(spawn_proc_t *p, int timeout_ms, int *wstatus)
{
    uint64_t until = svc_now_ns() + (uint64_t)timeout_ms * SVC_NS_PER_MS;
    uint64_t interval = POLL_FIRST_NS;

    while (!reap(p)) {
        if (svc_now_ns() >= until)
            return SVC_ETIMEDOUT;
        pause_ns(&interval);
    }
    if (wstatus != NULL)
        *wstatus = p->wstatus;
    return SVC_OK;
}

void spawn_status_text(int wstatus, char *buf, size_t len)
{
    if (wstatus == -1)
        snprintf(buf, len, "unknown (reaped elsewhere)");
    else if (WIFEXITED(wstatus))
        snprintf(buf, len, "exit %d", WEXITSTATUS(wstatus));
    else if (WIFSIGNALED(wstatus))
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    else
        snprintf(buf, len, "wait status 0x%x", (unsigned)wstatus);
}

void spawn_free(spawn_proc_t *p)
{
    if (p == NULL)
        return;
    if (!reap(p)) {
        kill(p->pid, SIGKILL);
        /* SIGKILL ends even a SIGSTOPped process. */
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    free(p);
}

bool spawn_port_open(const char *host, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd;
    bool ok;

    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return false;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

svc_err_t spawn_wait_port(spawn_proc_t *p, const char *host, int port, int timeout_ms,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t until = svc_now_ns() + (uint64_t)timeout_ms * SVC_NS_PER_MS;
    uint64_t interval = POLL_FIRST_NS;

    for (;;) {
        if (spawn_port_open(host, port))
            return SVC_OK;
        if (p != NULL && !spawn_alive(p)) {
            char st[64];
            spawn_status_text(p->wstatus, st, sizeof st);
            svc_errbuf_set(errbuf, "pid %d ended (%s) before %s:%d accepted connections",
                           (int)p->pid, st, host, port);
            return SVC_EUNAVAIL;
        }
        if (svc_now_ns() >= until) {
            svc_errbuf_set(errbuf, "%s:%d accepts no connections after %d ms", host, port,
                           timeout_ms);
            return SVC_ETIMEDOUT;
        }
        pause_ns(&interval);
    }
}

/* Binds 127.0.0.1:port (0: the kernel picks) and returns the bound port,
 * -1 when it cannot. */
static int try_port(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof sa;
    int fd, got = -1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        got = ntohs(sa.sin_port);
    close(fd);
    return got;
}

/* The first port of the ephemeral range (32768 when unknown). */
static int ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int lo = 32768;

    if (f != NULL) {
        if (fscanf(f, "%d", &lo) != 1 || lo <= 11000)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

int spawn_free_port(void)
{
    static _Thread_local unsigned seed;
    int lo = ephemeral_low();

    if (seed == 0) /* per thread; the address mixes threads of one process */
        seed = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&seed;
    for (int i = 0; i < 200; i++) {
        int port = try_port(10000 + (int)(rand_r(&seed) % (unsigned)(lo - 10000)));
        if (port > 0)
            return port;
    }
    return try_port(0);
}

char *spawn_log_read(const spawn_proc_t *p)
{
    FILE *f = fopen(p->log_path, "rb");
    size_t cap = 4096, len = 0;
    char *buf = NULL;

    if (f == NULL)
        return NULL;
    buf = malloc(cap);
    while (buf != NULL) {
        size_t n = fread(buf + len, 1, cap - 1 - len, f);
        len += n;
        if (n == 0 || len >= SPAWN_LOG_MAX)
            break;
        if (len == cap - 1) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[len] = '\0';
    return buf;
}

size_t spawn_log_count(const spawn_proc_t *p, const char *needle)
{
    char *log = spawn_log_read(p);
    size_t n = 0, step = strlen(needle) > 0 ? strlen(needle) : 1;

    for (const char *s = log; s != NULL && (s = strstr(s, needle)) != NULL; s += step)
        n++;
    free(log);
    return n;
}

bool spawn_log_contains(const spawn_proc_t *p, const char *needle)
{
    char *log = spawn_log_read(p);
    bool found = log != NULL && strstr(log, needle) != NULL;

    free(log);
    return found;
}

svc_err_t spawn_log_wait(spawn_proc_t *p, const char *needle, int timeout_ms)
{
    uint64_t until = svc_now_ns() + (uint64_t)timeout_ms * SVC_NS_PER_MS;
    uint64_t interval = POLL_FIRST_NS;

    for (;;) {
        /* Check liveness first: a child that exited has written its last line. */
        bool alive = spawn_alive(p);
        if (spawn_log_contains(p, needle))
            return SVC_OK;
        if (!alive)
            return SVC_EUNAVAIL;
        if (svc_now_ns() >= until)
            return SVC_ETIMEDOUT;
        pause_ns(&interval);
    }
}

void spawn_log_dump(const spawn_proc_t *p, int max_lines)
{
    char *log = spawn_log_read(p);
    size_t len, i;
    int lines = 0;

    if (log == NULL) {
        fprintf(stderr, "---- cannot read %s ----\n", p->log_path);
        return;
    }
    len = strlen(log);
    i = len > 0 && log[len - 1] == '\n' ? len - 1 : len;
    for (; i > 0; i--)
        if (log[i - 1] == '\n' && ++lines >= max_lines)
            break;
    fprintf(stderr, "---- last %d lines of %s ----\n%s%s---- end ----\n", max_lines, p->log_path,
            log + i, len > 0 && log[len - 1] != '\n' ? "\n" : "");
    free(log);
}

svc_err_t spawn_run(const spawn_opts_t *o, int timeout_ms, int *wstatus,
                    char errbuf[static SVC_ERRBUF_LEN])
{
    spawn_proc_t *p = NULL;
    svc_err_t err = spawn_start(o, &p, errbuf);

    if (err != SVC_OK)
        return err;
    err = spawn_wait_exit(p, timeout_ms, wstatus);
    if (err == SVC_ETIMEDOUT)
        svc_errbuf_set(errbuf, "%s still running after %d ms: killed (log %s)", o->path, timeout_ms,
                       p->log_path);
    spawn_free(p);
    return err;
}
