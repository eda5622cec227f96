/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reflect.c - the reflection index and answers (see reflect.h).
 *
 * A FileDescriptorSet is "repeated FileDescriptorProto file = 1". The top
 * level is walked by hand to keep each file's original bytes, which are what
 * a reply carries; each file is then decoded with descriptor_index.proto, a
 * subset of descriptor.proto that names only what a symbol lookup needs.
 */
#include <stdlib.h>
#include <string.h>

#include "grpc/reflection/v1alpha/reflection.pb-c.h"
#include "reflect.h"
#include "shopmicro/rpc/v1/descriptor_index.pb-c.h"

typedef Grpc__Reflection__V1alpha__ServerReflectionRequest req_t;
typedef Grpc__Reflection__V1alpha__ServerReflectionResponse resp_t;
typedef Shopmicro__Rpc__V1__File file_t;
typedef Shopmicro__Rpc__V1__Message msg_t;

typedef struct rfile {
    const uint8_t *bytes;
    size_t len;
    file_t *f;
    size_t *deps; /* indexes of f->dependency, resolved */
} rfile_t;

struct rpc__reflect {
    rfile_t *files;
    size_t n_files;
    char **services;
    size_t n_services;
};

/* ---- building the index --------------------------------------------------- */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0)
            return true;
    }
    return false;
}

/* Each "field 1, length-delimited" entry of the set into r->files. */
static svc_err_t split_set(rpc__reflect_t *r, const uint8_t *p, const uint8_t *end,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    while (p < end) {
        uint64_t tag, len;
        rfile_t *grown;

        if (!read_varint(&p, end, &tag) || tag != ((1u << 3) | 2u) || !read_varint(&p, end, &len) ||
            len > (uint64_t)(end - p)) {
            svc_errbuf_set(errbuf, "descriptor set: not a FileDescriptorSet");
            return SVC_EINVAL;
        }
        grown = realloc(r->files, (r->n_files + 1) * sizeof *grown);
        if (grown == NULL)
            return SVC_ENOMEM;
        r->files = grown;
        memset(&r->files[r->n_files], 0, sizeof r->files[0]);
        r->files[r->n_files].bytes = p;
        r->files[r->n_files++].len = (size_t)len;
        p += len;
    }
    return SVC_OK;
}

static long find_file(const rpc__reflect_t *r, const char *name)
{
    for (size_t i = 0; i < r->n_files; i++)
        if (strcmp(r->files[i].f->name, name) == 0)
            return (long)i;
    return -1;
}

static svc_err_t decode_files(rpc__reflect_t *r, char errbuf[static SVC_ERRBUF_LEN])
{
    for (size_t i = 0; i < r->n_files; i++) {
        rfile_t *rf = &r->files[i];
        rf->f = shopmicro__rpc__v1__file__unpack(NULL, rf->len, rf->bytes);
        if (rf->f == NULL) {
            svc_errbuf_set(errbuf, "descriptor set: file %zu does not decode", i);
            return SVC_EINVAL;
        }
    }
    for (size_t i = 0; i < r->n_files; i++) {
        rfile_t *rf = &r->files[i];
        rf->deps = calloc(rf->f->n_dependency + 1, sizeof *rf->deps);
        if (rf->deps == NULL)
            return SVC_ENOMEM;
        for (size_t d = 0; d < rf->f->n_dependency; d++) {
            long k = find_file(r, rf->f->dependency[d]);
            if (k < 0) {
                svc_errbuf_set(errbuf, "descriptor set: %s imports %s, which it lacks", rf->f->name,
                               rf->f->dependency[d]);
                return SVC_EINVAL;
            }
            rf->deps[d] = (size_t)k;
        }
    }
    return SVC_OK;
}

svc_err_t rpc__reflect_new(const unsigned char *set, size_t len, const char *const *services,
                           size_t n_services, rpc__reflect_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    rpc__reflect_t *r = calloc(1, sizeof *r);
    svc_err_t err = SVC_ENOMEM;

    *out = NULL;
    if (r == NULL)
        return SVC_ENOMEM;
    r->services = calloc(n_services + 1, sizeof *r->services);
    if (r->services == NULL)
        goto fail;
    for (; r->n_services < n_services; r->n_services++)
        if ((r->services[r->n_services] = strdup(services[r->n_services])) == NULL)
            goto fail;
    err = split_set(r, set, set + len, errbuf);
    if (err == SVC_OK)
        err = decode_files(r, errbuf);
    if (err != SVC_OK)
        goto fail;
    *out = r;
    return SVC_OK;
fail:
    if (err == SVC_ENOMEM)
        svc_errbuf_set(errbuf, "reflection index: out of memory");
    rpc__reflect_free(r);
    return err;
}

void rpc__reflect_free(rpc__reflect_t *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_files; i++) {
        shopmicro__rpc__v1__file__free_unpacked(r->files[i].f, NULL);
        free(r->files[i].deps);
    }
    for (size_t i = 0; i < r->n_services; i++)
        free(r->services[i]);
    free(r->services);
    free(r->files);
    free(r);
}

/* ---- symbol lookup --------------------------------------------------------- */

/* sym is "<scope>.<name>" exactly. */
static bool is_named(const char *sym, const char *scope, size_t scope_len, const char *name)
{
    if (scope_len > 0) {
        if (strncmp(sym, scope, scope_len) != 0 || sym[scope_len] != '.')
            return false;
        sym += scope_len + 1;
    }
    return strcmp(sym, name) == 0;
}

/* Does sym name a message under scope (recursively), or an enum in one? */
static bool message_has(const msg_t *m, const char *scope, const char *sym)
{
    char inner[512];
    int n = scope[0] != '\0' ? snprintf(inner, sizeof inner, "%s.%s", scope, m->name)
                             : snprintf(inner, sizeof inner, "%s", m->name);

    if (n < 0 || (size_t)n >= sizeof inner)
        return false;
    if (strcmp(sym, inner) == 0)
        return true;
    for (size_t e = 0; e < m->n_enum_type; e++)
        if (is_named(sym, inner, (size_t)n, m->enum_type[e]->name))
            return true;
    for (size_t k = 0; k < m->n_nested_type; k++)
        if (message_has(m->nested_type[k], inner, sym))
            return true;
    return false;
}

static bool file_defines(const file_t *f, const char *sym)
{
    size_t pl = strlen(f->package);

    for (size_t s = 0; s < f->n_service; s++) {
        char svc[512];
        const Shopmicro__Rpc__V1__Service *sv = f->service[s];
        int n = pl > 0 ? snprintf(svc, sizeof svc, "%s.%s", f->package, sv->name)
                       : snprintf(svc, sizeof svc, "%s", sv->name);
        if (n < 0 || (size_t)n >= sizeof svc)
            continue;
        if (strcmp(sym, svc) == 0)
            return true;
        for (size_t m = 0; m < sv->n_method; m++) /* grpcurl describes pkg.Svc.Method */
            if (is_named(sym, svc, (size_t)n, sv->method[m]->name))
                return true;
    }
    for (size_t e = 0; e < f->n_enum_type; e++)
        if (is_named(sym, f->package, pl, f->enum_type[e]->name))
            return true;
    for (size_t m = 0; m < f->n_message_type; m++)
        if (message_has(f->message_type[m], f->package, sym))
            return true;
    return false;
}

/* ---- answers --------------------------------------------------------------- */

/* The file and, depth first, every file it imports, each once. */
static size_t closure(const rpc__reflect_t *r, size_t i, bool *seen, ProtobufCBinaryData *out,
                      size_t n)
{
    if (seen[i])
        return n;
    seen[i] = true;
    out[n].data = (uint8_t *)r->files[i].bytes;
    out[n++].len = r->files[i].len;
    for (size_t d = 0; d < r->files[i].f->n_dependency; d++)
        n = closure(r, r->files[i].deps[d], seen, out, n);
    return n;
}

typedef struct answer {
    resp_t resp;
    Grpc__Reflection__V1alpha__FileDescriptorResponse files;
    Grpc__Reflection__V1alpha__ListServiceResponse list;
    Grpc__Reflection__V1alpha__ErrorResponse error;
} answer_t;

static void answer_error(answer_t *a, int code, const char *msg)
{
    a->resp.message_response_case =
        GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
    a->resp.error_response = &a->error;
    a->error.error_code = code;
    a->error.error_message = (char *)msg;
}

static void answer_files(answer_t *a, const rpc__reflect_t *r, long i, bool *seen,
                         ProtobufCBinaryData *buf)
{
    if (i < 0) {
        answer_error(a, 5 /* NOT_FOUND */, "not found");
        return;
    }
    a->resp.message_response_case =
        GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
    a->resp.file_descriptor_response = &a->files;
    a->files.file_descriptor_proto = buf;
    a->files.n_file_descriptor_proto = closure(r, (size_t)i, seen, buf, 0);
}

static long file_with_symbol(const rpc__reflect_t *r, const char *sym)
{
    for (size_t i = 0; i < r->n_files; i++)
        if (file_defines(r->files[i].f, sym))
            return (long)i;
    return -1;
}

static uint8_t *pack(const answer_t *a, size_t *out_len)
{
    size_t n = grpc__reflection__v1alpha__server_reflection_response__get_packed_size(&a->resp);
    uint8_t *out = malloc(n > 0 ? n : 1);

    if (out != NULL)
        *out_len = grpc__reflection__v1alpha__server_reflection_response__pack(&a->resp, out);
    return out;
}

uint8_t *rpc__reflect_answer(const rpc__reflect_t *r, const uint8_t *in, size_t in_len,
                             size_t *out_len)
{
    req_t *q = grpc__reflection__v1alpha__server_reflection_request__unpack(NULL, in_len, in);
    Grpc__Reflection__V1alpha__ServiceResponse *svcs = NULL, **svcp = NULL;
    bool *seen = calloc(r->n_files + 1, sizeof *seen);
    ProtobufCBinaryData *buf = calloc(r->n_files + 1, sizeof *buf);
    answer_t a = {.resp = GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__INIT,
                  .files = GRPC__REFLECTION__V1ALPHA__FILE_DESCRIPTOR_RESPONSE__INIT,
                  .list = GRPC__REFLECTION__V1ALPHA__LIST_SERVICE_RESPONSE__INIT,
                  .error = GRPC__REFLECTION__V1ALPHA__ERROR_RESPONSE__INIT};
    uint8_t *out = NULL;

    if (q == NULL || seen == NULL || buf == NULL)
        goto done;
    a.resp.valid_host = q->host;
    a.resp.original_request = q;
    switch (q->message_request_case) {
    case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
        answer_files(&a, r, find_file(r, q->file_by_filename), seen, buf);
        break;
    case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL:
        answer_files(&a, r, file_with_symbol(r, q->file_containing_symbol), seen, buf);
        break;
    case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
        svcs = calloc(r->n_services + 1, sizeof *svcs);
        svcp = calloc(r->n_services + 1, sizeof *svcp);
        if (svcs == NULL || svcp == NULL)
            goto done;
        for (size_t i = 0; i < r->n_services; i++) {
            grpc__reflection__v1alpha__service_response__init(&svcs[i]);
            svcs[i].name = r->services[i];
            svcp[i] = &svcs[i];
        }
        a.list.service = svcp;
        a.list.n_service = r->n_services;
        a.resp.message_response_case =
            GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
        a.resp.list_services_response = &a.list;
        break;
    case GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST__NOT_SET:
        answer_error(&a, 3 /* INVALID_ARGUMENT */, "the request asks nothing");
        break;
    default: /* the project declares no extensions */
        answer_error(&a, 5 /* NOT_FOUND */, "no extensions on this server");
        break;
    }
    out = pack(&a, out_len);
done:
    free(svcs);
    free(svcp);
    free(seen);
    free(buf);
    if (q != NULL)
        grpc__reflection__v1alpha__server_reflection_request__free_unpacked(q, NULL);
    return out;
}
