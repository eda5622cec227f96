/* SPDX-License-Identifier: Apache-2.0 */
/* util.c - address probing, gRPC log routing and deadline conversion. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "internal.h"
#include "sock.h"

/* Splits "host:port" or "[v6]:port". Returns false when it is not numeric. */
static bool split_listen(const char *listen, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(listen, ':');
    const char *h = listen;
    size_t n;
    char *end;
    long p;

    if (colon == NULL)
        return false;
    n = (size_t)(colon - listen);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n >= hostlen)
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p < 0 || p > 65535)
        return false;
    *port = (int)p;
    return true;
}

int rpc__probe_listen(const char *listen, char errbuf[static SVC_ERRBUF_LEN])
{
    char host[128];
    int port, fd, one = 1, rc = 0;
    struct sockaddr_storage ss;
    socklen_t len;

    memset(&ss, 0, sizeof ss);
    if (!split_listen(listen, host, sizeof host, &port) || port == 0)
        return 0;
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
        len = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
        len = sizeof(struct sockaddr_in6);
    } else {
        return 0; /* a name: let gRPC resolve it */
    }
    fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        svc_errbuf_set(errbuf, "cannot listen on %s: %s%s", listen, strerror(errno),
                       errno == EADDRINUSE ? " (is another instance running?)" : "");
        rc = -1;
    }
    close(fd);
    return rc;
}

static void grpc_log_to_svc(gpr_log_func_args *a)
{
    svc_log_level_t lvl = a->severity == GPR_LOG_SEVERITY_ERROR  ? SVC_LOG_ERROR
                          : a->severity == GPR_LOG_SEVERITY_INFO ? SVC_LOG_INFO
                                                                 : SVC_LOG_DEBUG;
    const char *base = strrchr(a->file, '/');

    if (svc_log_enabled(lvl))
        svc_log_write(lvl, "grpc", NULL, "%s (%s:%d)", a->message, base ? base + 1 : a->file,
                      a->line);
}

void rpc__route_grpc_logs(void)
{
    gpr_set_log_function(grpc_log_to_svc);
    /* Respect an explicit GRPC_VERBOSITY; otherwise only errors. */
    if (getenv("GRPC_VERBOSITY") == NULL)
        gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
}

gpr_timespec rpc_deadline_to_timespec(uint64_t deadline_ns)
{
    uint64_t now = svc_now_ns();

    if (deadline_ns == SVC_DEADLINE_NONE)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    /* gpr's monotonic clock has its own epoch: convert through "time left". */
    return gpr_time_add(
        gpr_now(GPR_CLOCK_MONOTONIC),
        gpr_time_from_nanos(deadline_ns > now ? (int64_t)(deadline_ns - now) : 0, GPR_TIMESPAN));
}

uint64_t rpc_deadline_from_timespec(gpr_timespec t)
{
    gpr_timespec now, left;
    int64_t ns;

    if (t.tv_sec == INT64_MAX) /* gpr's "infinite future" in any clock */
        return SVC_DEADLINE_NONE;
    now = gpr_now(t.clock_type);
    left = gpr_time_sub(t, now);
    ns = left.tv_sec * 1000000000ll + left.tv_nsec;
    return ns <= 0 ? svc_now_ns() : svc_now_ns() + (uint64_t)ns;
}

grpc_completion_queue *rpc_cq_new_non_polling(void)
{
    const char *engine = getenv("GRPC_POLL_STRATEGY");
    grpc_completion_queue_attributes attr = {GRPC_CQ_CURRENT_VERSION, GRPC_CQ_NEXT,
                                             GRPC_CQ_NON_POLLING, NULL};

    /* epoll1 keeps every descriptor in one epoll set, which any polling
     * thread serves; the "poll" engine polls only a queue's own calls, so
     * there a queue that nobody polls would stall its calls. */
    if (engine != NULL && engine[0] != '\0' && strcmp(engine, "epoll1") != 0)
        attr.cq_polling_type = GRPC_CQ_DEFAULT_POLLING;

    return grpc_completion_queue_create(grpc_completion_queue_factory_lookup(&attr), &attr, NULL);
}

grpc_byte_buffer *rpc_message_pack(const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    grpc_slice sl = grpc_slice_malloc(len);
    grpc_byte_buffer *bb;

    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(sl));
    bb = grpc_raw_byte_buffer_create(&sl, 1); /* takes its own reference */
    grpc_slice_unref(sl);
    return bb;
}

ProtobufCMessage *rpc_message_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *d,
                                     ProtobufCAllocator *a)
{
    grpc_byte_buffer_reader r;
    ProtobufCMessage *m;
    grpc_slice sl;

    if (bb == NULL || !grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    sl = grpc_byte_buffer_reader_readall(&r); /* one flat slice, whatever arrived */
    grpc_byte_buffer_reader_destroy(&r);
    m = protobuf_c_message_unpack(d, a, GRPC_SLICE_LENGTH(sl), GRPC_SLICE_START_PTR(sl));
    grpc_slice_unref(sl);
    return m;
}

rpc_md_presence_t rpc_md_lookup(const grpc_metadata_array *md, const char *key, const char **value,
                                size_t *len)
{
    rpc_md_presence_t seen = RPC_MD_ABSENT;

    *value = NULL;
    *len = 0;
    /* Every entry is looked at: a second one makes the first ambiguous. */
    for (size_t i = 0; md != NULL && i < md->count; i++) {
        if (grpc_slice_str_cmp(md->metadata[i].key, key) != 0)
            continue;
        if (seen != RPC_MD_ABSENT)
            return RPC_MD_REPEATED;
        *value = (const char *)GRPC_SLICE_START_PTR(md->metadata[i].value);
        *len = GRPC_SLICE_LENGTH(md->metadata[i].value);
        seen = RPC_MD_ONE;
    }
    return seen;
}

bool rpc_md_find(const grpc_metadata_array *md, const char *key, const char **value, size_t *len)
{
    return rpc_md_lookup(md, key, value, len) != RPC_MD_ABSENT;
}
