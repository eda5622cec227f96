# shellcheck shell=bash
# deploy/local/apidocs.sh: `stack.sh api-docs`, a local page to browse the gateway's OpenAPI
# document (docs/gateway.md, "The OpenAPI document"): Swagger UI's files from PyPI
# (apidocs-requirements.txt, in <run folder>/venv-apidocs/ through tests/tools/pyvenv.sh) and the
# build's build/gateway/openapi.json, written to <run folder>/api-docs/ and served on
# 127.0.0.1:$SHOPMICRO_API_DOCS_PORT (default 8088) by python3's http.server until Ctrl-C.
# "Try it out" calls the gateway of this stack: the local stack's gateway allows that page's origin
# (GATEWAY_CORS_ORIGINS in services.sh). Sourced by stack.sh; uses lib/common.sh.

API_DOCS_PORT_SPECS=("SHOPMICRO_API_DOCS_PORT=8088")

# api_docs_write DIR: the page in DIR (index.html, Swagger UI's script and style, openapi.json).
api_docs_write() {
  local dir=$1 doc="$BUILD_DIR/gateway/openapi.json" static
  [[ -f $doc ]] || die "api-docs: no $(rel "$doc"): run $(rel "$SELF") build first"
  static=$("$ROOT/tests/tools/pyvenv.sh" -r "$ROOT/deploy/local/apidocs-requirements.txt" \
    "$RUN/venv-apidocs" python -c 'import os, swagger_ui; print(os.path.join(os.path.dirname(swagger_ui.__file__), "static"))') ||
    die "api-docs: cannot install swagger-ui-py (PyPI) into $(rel "$RUN/venv-apidocs")"
  mkdir -p "$dir"
  cp "$static/swagger-ui-bundle.js" "$static/swagger-ui.css" "$static/favicon-32x32.png" "$dir/"
  cp "$doc" "$dir/openapi.json"
  # The document names no server (it cannot know where a gateway runs): the page adds this
  # stack's, so that "Try it out" goes to it.
  cat >"$dir/index.html" <<HTML
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ShopMicro API</title>
<link rel="icon" href="favicon-32x32.png">
<link rel="stylesheet" href="swagger-ui.css">
</head>
<body>
<div id="ui"></div>
<script src="swagger-ui-bundle.js"></script>
<script>
fetch("openapi.json").then(function (r) { return r.json(); }).then(function (spec) {
  spec.servers = [{url: "http://127.0.0.1:$SHOPMICRO_GATEWAY_PORT", description: "this stack's gateway"}];
  window.ui = SwaggerUIBundle({spec: spec, dom_id: "#ui", deepLinking: true});
});
</script>
</body>
</html>
HTML
}

# cmd_api_docs [--no-serve]: write the page; serve it unless --no-serve.
cmd_api_docs() {
  local dir="$RUN/api-docs" serve=1
  case ${1:-} in
    --no-serve) serve=0 ;;
    "") ;;
    *) die "api-docs: unknown argument: $1 (api-docs [--no-serve])" ;;
  esac
  api_docs_write "$dir"
  say "api-docs: wrote $(rel "$dir")/index.html"
  (( serve )) || return 0
  is_port "$SHOPMICRO_API_DOCS_PORT" || die "api-docs: SHOPMICRO_API_DOCS_PORT='$SHOPMICRO_API_DOCS_PORT' is not a port"
  say "api-docs: open http://127.0.0.1:$SHOPMICRO_API_DOCS_PORT/ (Ctrl-C stops it); Authorize with: $(rel "$SELF") token"
  exec python3 -m http.server --bind 127.0.0.1 --directory "$dir" "$SHOPMICRO_API_DOCS_PORT"
}
