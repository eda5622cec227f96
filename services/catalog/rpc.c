/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc.c - CatalogService: one function per RPC, business rules only.
 * Decoding, deadlines, status mapping and logging are pkg/rpc's job.
 */
#include <string.h>

#include "catalog.h"
#include "page_token.h"
#include "shopmicro/limits.h" /* the bounds checked here are the OpenAPI document's */
#include "store.h"

#define NAME_MAX_CHARS        SHOPMICRO_PRODUCT_NAME_MAX_CHARS
#define DESCRIPTION_MAX_CHARS SHOPMICRO_PRODUCT_DESCRIPTION_MAX_CHARS
#define PAGE_SIZE_DEFAULT     SHOPMICRO_PAGE_SIZE_DEFAULT
#define PAGE_SIZE_MAX         SHOPMICRO_PAGE_SIZE_MAX

typedef Shopmicro__Catalog__V1__CreateProductRequest create_req_t;
typedef Shopmicro__Catalog__V1__GetProductRequest get_req_t;
typedef Shopmicro__Catalog__V1__ListProductsRequest list_req_t;
typedef Shopmicro__Catalog__V1__ListProductsResponse list_resp_t;
typedef Shopmicro__Catalog__V1__BatchGetProductsRequest batch_req_t;
typedef Shopmicro__Catalog__V1__BatchGetProductsResponse batch_resp_t;

static svc_err_t create_product(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                                char errbuf[static SVC_ERRBUF_LEN])
{
    const create_req_t *req = (const create_req_t *)in;
    svc_alloc_t a = rpc_ctx_allocator(ctx);
    cat_product_t *p = NULL;
    long name_len = svc_utf8_chars(req->name), desc_len = svc_utf8_chars(req->description);
    svc_err_t err;

    if (name_len < 1 || name_len > NAME_MAX_CHARS) {
        svc_errbuf_set(errbuf, "name must be 1-%d characters of UTF-8 text", NAME_MAX_CHARS);
        rpc_ctx_set_bad_field(ctx, "name");
        return SVC_EINVAL;
    }
    if (desc_len < 0 || desc_len > DESCRIPTION_MAX_CHARS) {
        svc_errbuf_set(errbuf, "description must be at most %d characters of UTF-8 text",
                       DESCRIPTION_MAX_CHARS);
        rpc_ctx_set_bad_field(ctx, "description");
        return SVC_EINVAL;
    }
    if (req->price_cents < 0) {
        svc_errbuf_set(errbuf, "price_cents must be >= 0");
        rpc_ctx_set_bad_field(ctx, "price_cents");
        return SVC_EINVAL;
    }
    if (req->stock < 0) {
        svc_errbuf_set(errbuf, "stock must be >= 0");
        rpc_ctx_set_bad_field(ctx, "stock");
        return SVC_EINVAL;
    }
    err = cat_store_create(rpc_ctx_worker(ctx), req->name, req->description, req->price_cents,
                           req->stock, rpc_ctx_deadline(ctx), &a, &p, errbuf);
    *out = (ProtobufCMessage *)p;
    return err;
}

static svc_err_t get_product(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    const get_req_t *req = (const get_req_t *)in;
    svc_alloc_t a = rpc_ctx_allocator(ctx);
    cat_product_t *p = NULL;
    svc_err_t err;

    if (!svc_is_uuid(req->id)) {
        svc_errbuf_set(errbuf, "product not found");
        rpc_ctx_set_error_reason(ctx, "PRODUCT_NOT_FOUND");
        return SVC_ENOTFOUND;
    }
    err = cat_store_get(rpc_ctx_worker(ctx), req->id, rpc_ctx_deadline(ctx), &a, &p, errbuf);
    if (err == SVC_ENOTFOUND) {
        svc_errbuf_set(errbuf, "product not found");
        rpc_ctx_set_error_reason(ctx, "PRODUCT_NOT_FOUND");
    }
    *out = (ProtobufCMessage *)p;
    return err;
}

static svc_err_t list_products(rpc_ctx_t *ctx, const ProtobufCMessage *in, ProtobufCMessage **out,
                               char errbuf[static SVC_ERRBUF_LEN])
{
    const list_req_t *req = (const list_req_t *)in;
    svc_alloc_t a = rpc_ctx_allocator(ctx);
    list_resp_t *resp;
    int64_t after = 0, last = 0;
    int size = req->page_size;
    bool more = false;
    svc_err_t err;

    if (size < 0) {
        svc_errbuf_set(errbuf, "page_size must not be negative");
        rpc_ctx_set_bad_field(ctx, "page_size");
        return SVC_EINVAL;
    }
    size = size == 0 ? PAGE_SIZE_DEFAULT : size > PAGE_SIZE_MAX ? PAGE_SIZE_MAX : size;
    if (req->page_token[0] != '\0' && cat_page_token_decode(req->page_token, &after) != SVC_OK) {
        svc_errbuf_set(errbuf, "page_token is invalid");
        rpc_ctx_set_bad_field(ctx, "page_token");
        return SVC_EINVAL;
    }
    resp = rpc_ctx_alloc(ctx, sizeof *resp + CAT_PAGE_TOKEN_MAX);
    if (resp == NULL)
        return SVC_ENOMEM;
    shopmicro__catalog__v1__list_products_response__init(resp);
    err = cat_store_list(rpc_ctx_worker(ctx), after, size, rpc_ctx_deadline(ctx), &a,
                         &resp->products, &resp->n_products, &last, &more, errbuf);
    if (err != SVC_OK)
        return err;
    if (more) {
        resp->next_page_token = (char *)(resp + 1);
        cat_page_token_encode(last, resp->next_page_token);
    }
    *out = &resp->base;
    return SVC_OK;
}

/* products[i] answers ids[i]; an unknown id gets an empty Product (the
 * proto's contract), so one unknown line does not hide the others. */
static svc_err_t batch_get_products(rpc_ctx_t *ctx, const ProtobufCMessage *in,
                                    ProtobufCMessage **out, char errbuf[static SVC_ERRBUF_LEN])
{
    const batch_req_t *req = (const batch_req_t *)in;
    svc_alloc_t a = rpc_ctx_allocator(ctx);
    batch_resp_t *resp;
    svc_err_t err;

    if (req->n_ids < 1 || req->n_ids > CAT_BATCH_MAX) {
        svc_errbuf_set(errbuf, "ids must have 1-%d entries (got %zu)", CAT_BATCH_MAX, req->n_ids);
        rpc_ctx_set_bad_field(ctx, "ids");
        return SVC_EINVAL;
    }
    resp = rpc_ctx_alloc(ctx, sizeof *resp + req->n_ids * sizeof *resp->products);
    if (resp == NULL)
        return SVC_ENOMEM;
    shopmicro__catalog__v1__batch_get_products_response__init(resp);
    resp->products = (cat_product_t **)(resp + 1);
    resp->n_products = req->n_ids;
    err = cat_store_get_many(rpc_ctx_worker(ctx), (const char *const *)req->ids, req->n_ids,
                             rpc_ctx_deadline(ctx), &a, resp->products, errbuf);
    for (size_t i = 0; err == SVC_OK && i < req->n_ids; i++) {
        if (resp->products[i] != NULL)
            continue;
        resp->products[i] = rpc_ctx_alloc(ctx, sizeof *resp->products[i]);
        if (resp->products[i] == NULL)
            return SVC_ENOMEM;
        shopmicro__catalog__v1__product__init(resp->products[i]);
    }
    *out = &resp->base;
    return err;
}

/* Every method runs inside the fault knobs (fault.h; a no-op unless a test
 * turned them on), so a slot is held for the handler's whole run. */
static svc_err_t with_faults(rpc_handler_fn h, rpc_ctx_t *ctx, const ProtobufCMessage *in,
                             ProtobufCMessage **out, char errbuf[static SVC_ERRBUF_LEN])
{
    const cat_app_t *app = rpc_ctx_app(ctx);
    cat_fault_t *f = app != NULL ? app->fault : NULL;
    cat_fault_pass_t pass;
    svc_err_t err = cat_fault_enter(f, ctx, &pass, errbuf);

    if (err == SVC_OK)
        err = h(ctx, in, out, errbuf);
    cat_fault_leave(f, &pass);
    return err;
}

#define FAULTED(fn)                                                                                \
    static svc_err_t fn##_faulted(rpc_ctx_t *ctx, const ProtobufCMessage *in,                      \
                                  ProtobufCMessage **out, char errbuf[static SVC_ERRBUF_LEN])      \
    {                                                                                              \
        return with_faults(fn, ctx, in, out, errbuf);                                              \
    }
FAULTED(create_product)
FAULTED(get_product)
FAULTED(list_products)
FAULTED(batch_get_products)

#define METHOD(name) "/shopmicro.catalog.v1.CatalogService/" name

const rpc_method_t cat_methods[] = {
    {METHOD("CreateProduct"), &shopmicro__catalog__v1__create_product_request__descriptor,
     create_product_faulted},
    {METHOD("GetProduct"), &shopmicro__catalog__v1__get_product_request__descriptor,
     get_product_faulted},
    {METHOD("ListProducts"), &shopmicro__catalog__v1__list_products_request__descriptor,
     list_products_faulted},
    {METHOD("BatchGetProducts"), &shopmicro__catalog__v1__batch_get_products_request__descriptor,
     batch_get_products_faulted},
};
const size_t cat_methods_count = SVC_COUNTOF(cat_methods);
