"""tests/deploy/k8s_shopper.py: the checks of the optional component deploy/k8s/components/shopper
(check_k8s.py, rule 6), rendered in a temporary overlay of the base."""
import base64
import os
import re
import subprocess
import tempfile

from k8s_lib import PLACEHOLDER, check, check_hardened, walk

SHOPPER_KINDS = {("Deployment", "shopper"), ("ConfigMap", "shopper-config"), ("Secret", "shopper-tokens")}
SHOPPER_MAX_RATE = 5


def render_with_shopper(kubectl, kdir):
    """The base with components/shopper, through an overlay in a temporary folder (an overlay may
    not sit inside its base's folder)."""
    with tempfile.TemporaryDirectory(prefix="check-k8s-") as tmp:
        rel = os.path.relpath(kdir, tmp)
        with open(os.path.join(tmp, "kustomization.yaml"), "w", encoding="utf-8") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    f"resources:\n  - {rel}\ncomponents:\n  - {rel}/components/shopper\n")
        r = subprocess.run([kubectl, "kustomize", tmp], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def generated(name):
    """A generated object's name without kustomize's hash suffix."""
    return re.sub(r"-[a-z0-9]{10}$", "", name)


def check_shopper(tag, base_docs, docs):
    key = lambda d: (d.get("kind"), generated((d.get("metadata") or {}).get("name", "")))
    base = {key(d): d for d in base_docs if d}
    objs = {key(d): d for d in docs if d}
    added = set(objs) - set(base)
    check(added == SHOPPER_KINDS, f"{tag}: shopper: the component adds {sorted(SHOPPER_KINDS)} ({sorted(added)})")
    changed = sorted(k for k in base if objs.get(k) != base[k])
    check(not changed, f"{tag}: shopper: the component changes no object of the base ({changed or 'none changed'})")
    ns = next(iter(n for (k, n) in base if k == "Namespace"), None)
    for k in sorted(added):
        d = objs[k]
        meta = d.get("metadata") or {}
        errors, unchecked = [], []
        walk(d, k[0], f"{k[0]}/{k[1]}", errors, unchecked)
        check(not errors, f"{tag}: shopper: {k[0]}/{k[1]}: every field is a Kubernetes 1.30 field of its type"
              + ("" if not errors else ": " + "; ".join(errors)))
        check(meta.get("namespace") == ns and (meta.get("labels") or {}).get("app.kubernetes.io/part-of") == "shopmicro",
              f"{tag}: shopper: {k[0]}/{k[1]}: in namespace {ns}, label part-of=shopmicro")
    dep = objs.get(("Deployment", "shopper"))
    if dep is None:
        return
    spec = dep.get("spec") or {}
    pspec = (spec.get("template") or {}).get("spec") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    check(spec.get("replicas") == 1, f"{tag}: shopper: 1 replica (SHOPPER_RATE is per pod; got {spec.get('replicas')})")
    check(pspec.get("enableServiceLinks") is False and pspec.get("automountServiceAccountToken") is False,
          f"{tag}: shopper: enableServiceLinks and automountServiceAccountToken false")
    cs = pspec.get("containers") or []
    if not check(len(cs) == 1, f"{tag}: shopper: one container"):
        return
    c = cs[0]
    check_hardened(tag, "shopper", pspec, c)
    for pname in ("startupProbe", "livenessProbe"):
        cmd = " ".join(((c.get(pname) or {}).get("exec") or {}).get("command") or [])
        check(cmd.endswith(" /opt/shopper/alive.py 30") or "/opt/shopper/alive.py" in cmd,
              f"{tag}: shopper: {pname} runs alive.py ({cmd or 'none'})")
    env = {}
    for ef in c.get("envFrom") or []:
        ref = (ef.get("configMapRef") or {}).get("name")
        cm = next((d for d in docs if d and d.get("kind") == "ConfigMap" and d["metadata"]["name"] == ref), None)
        if check(cm is not None, f"{tag}: shopper: configMapRef {ref} exists in the render"):
            env.update(cm.get("data") or {})
    check(not any(k in env for k in ("SHOPPER_TOKENS", "SHOPPER_ADMIN_TOKEN")),
          f"{tag}: shopper: no token in its ConfigMap (SHOPPER_TOKENS, SHOPPER_ADMIN_TOKEN unset)")
    m = re.match(r"^http://([a-z0-9.-]+):(\d+)$", env.get("LOCUST_HOST", ""))
    gw = next((d for d in docs if d and d.get("kind") == "Service" and d["metadata"]["name"] == "gateway"), {})
    http = [p.get("port") for p in (gw.get("spec") or {}).get("ports") or [] if p.get("name") == "http"]
    check(bool(m) and m.group(1).split(".")[0] == "gateway" and int(m.group(2)) in http,
          f"{tag}: shopper: LOCUST_HOST={env.get('LOCUST_HOST')} is the gateway Service's http port ({http})")
    try:
        rate = float(env.get("SHOPPER_RATE", "2"))
    except ValueError:
        rate = -1
    check(0 < rate <= SHOPPER_MAX_RATE, f"{tag}: shopper: a gentle SHOPPER_RATE ({env.get('SHOPPER_RATE')}, at most {SHOPPER_MAX_RATE})")
    vols = {v.get("name"): v for v in pspec.get("volumes") or []}

    def mount_of(path):
        return max((mt for mt in c.get("volumeMounts") or [] if path.startswith(mt.get("mountPath", "").rstrip("/") + "/")),
                   key=lambda mt: len(mt.get("mountPath", "")), default=None)
    for var in ("SHOPPER_TOKENS_FILE", "SHOPPER_ADMIN_TOKEN_FILE"):
        mt = mount_of(env.get(var, ""))
        sec = (vols.get((mt or {}).get("name")) or {}).get("secret") or {}
        check(mt is not None and mt.get("readOnly") is True and not mt.get("subPath")
              and generated(sec.get("secretName", "")) == "shopper-tokens",
              f"{tag}: shopper: {var}={env.get(var)} is in a read-only mount of the Secret shopper-tokens, without subPath")
    secret = next((d for d in docs if d and d.get("kind") == "Secret" and generated(d["metadata"]["name"]) == "shopper-tokens"), {})
    vals = {k: base64.b64decode("".join(str(v).split())).decode() for k, v in (secret.get("data") or {}).items()}
    check(vals.get("tokens") == PLACEHOLDER and set(vals) <= {"tokens", "admin-token"},
          f"{tag}: shopper: the Secret shopper-tokens holds the placeholder {PLACEHOLDER} only ({sorted(vals)})")
    mt = mount_of(env.get("SHOPPER_STATS_FILE", ""))
    check(mt is not None and not mt.get("readOnly") and "emptyDir" in (vols.get(mt.get("name")) or {}),
          f"{tag}: shopper: SHOPPER_STATS_FILE={env.get('SHOPPER_STATS_FILE')} is in an emptyDir")
    sel_hits = [f"{d['kind']}/{d['metadata']['name']}" for d in docs if d and d.get("kind") in ("Service", "PodDisruptionBudget")
                and (d.get("spec") or {}).get("type") != "ExternalName"  # no endpoints whatever its selector
                and (sel := ((d.get("spec") or {}).get("selector") or {}))
                and all(labels.get(k2) == v for k2, v in (sel.get("matchLabels", sel) if d["kind"] == "PodDisruptionBudget" else sel).items())]
    check(not sel_hits, f"{tag}: shopper: no Service or PodDisruptionBudget selects it ({', '.join(sel_hits) or 'none'})")
