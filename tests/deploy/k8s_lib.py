"""tests/deploy/k8s_lib.py: what the deploy/k8s checks share (check_k8s.py, k8s_shopper.py): the
verdict counter, the Kubernetes 1.30 schema walk, quantities, the placeholder of the Secrets, and
the hardening every container must have. Standard library only."""
import re

PLACEHOLDER = "CHANGE-ME"

# Kubernetes 1.30's types, as far as deploy/k8s uses them: "[!]field:kind" where kind is s string,
# i integer, b boolean, q quantity, x int-or-string, a/K array of K, m/K map of K, or a type
# below; ! marks a required field. A field whose type is not listed is reported, not checked.
SCHEMA = {
    "Deployment": "apiVersion:s kind:s metadata:ObjectMeta spec:DeploymentSpec status:DeploymentStatus",
    "DeploymentSpec": "minReadySeconds:i paused:b progressDeadlineSeconds:i replicas:i revisionHistoryLimit:i !selector:LabelSelector strategy:DeploymentStrategy !template:PodTemplateSpec",
    "DeploymentStrategy": "rollingUpdate:RollingUpdateDeployment type:s",
    "RollingUpdateDeployment": "maxSurge:x maxUnavailable:x",
    "PodTemplateSpec": "metadata:ObjectMeta spec:PodSpec",
    "PodSpec": "activeDeadlineSeconds:i affinity:Affinity automountServiceAccountToken:b !containers:a/Container dnsConfig:PodDNSConfig dnsPolicy:s enableServiceLinks:b ephemeralContainers:a/EphemeralContainer hostAliases:a/HostAlias hostIPC:b hostNetwork:b hostPID:b hostUsers:b hostname:s imagePullSecrets:a/LocalObjectReference initContainers:a/Container nodeName:s nodeSelector:m/s os:PodOS overhead:m/q preemptionPolicy:s priority:i priorityClassName:s readinessGates:a/PodReadinessGate resourceClaims:a/PodResourceClaim restartPolicy:s runtimeClassName:s schedulerName:s schedulingGates:a/PodSchedulingGate securityContext:PodSecurityContext serviceAccount:s serviceAccountName:s setHostnameAsFQDN:b shareProcessNamespace:b subdomain:s terminationGracePeriodSeconds:i tolerations:a/Toleration topologySpreadConstraints:a/TopologySpreadConstraint volumes:a/Volume",
    "Container": "args:a/s command:a/s env:a/EnvVar envFrom:a/EnvFromSource image:s imagePullPolicy:s lifecycle:Lifecycle livenessProbe:Probe !name:s ports:a/ContainerPort readinessProbe:Probe resizePolicy:a/ContainerResizePolicy resources:ResourceRequirements restartPolicy:s securityContext:SecurityContext startupProbe:Probe stdin:b stdinOnce:b terminationMessagePath:s terminationMessagePolicy:s tty:b volumeDevices:a/VolumeDevice volumeMounts:a/VolumeMount workingDir:s",
    "ContainerPort": "!containerPort:i hostIP:s hostPort:i name:s protocol:s",
    "EnvFromSource": "configMapRef:ConfigMapEnvSource prefix:s secretRef:SecretEnvSource",
    "ConfigMapEnvSource": "name:s optional:b",
    "SecretEnvSource": "name:s optional:b",
    "EnvVar": "!name:s value:s valueFrom:EnvVarSource",
    "EnvVarSource": "configMapKeyRef:ConfigMapKeySelector fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector secretKeyRef:SecretKeySelector",
    "ObjectFieldSelector": "apiVersion:s !fieldPath:s",
    "ConfigMapKeySelector": "!key:s name:s optional:b",
    "SecretKeySelector": "!key:s name:s optional:b",
    "Probe": "exec:ExecAction failureThreshold:i grpc:GRPCAction httpGet:HTTPGetAction initialDelaySeconds:i periodSeconds:i successThreshold:i tcpSocket:TCPSocketAction terminationGracePeriodSeconds:i timeoutSeconds:i",
    "HTTPGetAction": "host:s httpHeaders:a/HTTPHeader path:s !port:x scheme:s",
    "HTTPHeader": "!name:s !value:s",
    "GRPCAction": "!port:i service:s",
    "ExecAction": "command:a/s",
    "TCPSocketAction": "host:s !port:x",
    "Lifecycle": "postStart:LifecycleHandler preStop:LifecycleHandler",
    "LifecycleHandler": "exec:ExecAction httpGet:HTTPGetAction sleep:SleepAction tcpSocket:TCPSocketAction",
    "SleepAction": "!seconds:i",
    "ResourceRequirements": "claims:a/ResourceClaim limits:m/q requests:m/q",
    "SecurityContext": "allowPrivilegeEscalation:b appArmorProfile:AppArmorProfile capabilities:Capabilities privileged:b procMount:s readOnlyRootFilesystem:b runAsGroup:i runAsNonRoot:b runAsUser:i seLinuxOptions:SELinuxOptions seccompProfile:SeccompProfile windowsOptions:WindowsSecurityContextOptions",
    "PodSecurityContext": "appArmorProfile:AppArmorProfile fsGroup:i fsGroupChangePolicy:s runAsGroup:i runAsNonRoot:b runAsUser:i seLinuxOptions:SELinuxOptions seccompProfile:SeccompProfile supplementalGroups:a/i sysctls:a/Sysctl windowsOptions:WindowsSecurityContextOptions",
    "Capabilities": "add:a/s drop:a/s",
    "SeccompProfile": "localhostProfile:s !type:s",
    "TopologySpreadConstraint": "labelSelector:LabelSelector matchLabelKeys:a/s !maxSkew:i minDomains:i nodeAffinityPolicy:s nodeTaintsPolicy:s !topologyKey:s !whenUnsatisfiable:s",
    "Service": "apiVersion:s kind:s metadata:ObjectMeta spec:ServiceSpec status:ServiceStatus",
    "ServiceSpec": "allocateLoadBalancerNodePorts:b clusterIP:s clusterIPs:a/s externalIPs:a/s externalName:s externalTrafficPolicy:s healthCheckNodePort:i internalTrafficPolicy:s ipFamilies:a/s ipFamilyPolicy:s loadBalancerClass:s loadBalancerIP:s loadBalancerSourceRanges:a/s ports:a/ServicePort publishNotReadyAddresses:b selector:m/s sessionAffinity:s sessionAffinityConfig:SessionAffinityConfig trafficDistribution:s type:s",
    "ServicePort": "appProtocol:s name:s nodePort:i !port:i protocol:s targetPort:x",
    "Volume": "configMap:ConfigMapVolumeSource emptyDir:EmptyDirVolumeSource !name:s secret:SecretVolumeSource",
    "ConfigMapVolumeSource": "defaultMode:i items:a/KeyToPath name:s optional:b",
    "SecretVolumeSource": "defaultMode:i items:a/KeyToPath optional:b secretName:s",
    "KeyToPath": "!key:s mode:i !path:s",
    "EmptyDirVolumeSource": "medium:s sizeLimit:q",
    "VolumeMount": "!mountPath:s mountPropagation:s !name:s readOnly:b recursiveReadOnly:s subPath:s subPathExpr:s",
    "ConfigMap": "apiVersion:s binaryData:m/s data:m/s immutable:b kind:s metadata:ObjectMeta",
    "Secret": "apiVersion:s data:m/s immutable:b kind:s metadata:ObjectMeta stringData:m/s type:s",
    "Namespace": "apiVersion:s kind:s metadata:ObjectMeta spec:NamespaceSpec status:NamespaceStatus",
    "NamespaceSpec": "finalizers:a/s",
    "PodDisruptionBudget": "apiVersion:s kind:s metadata:ObjectMeta spec:PodDisruptionBudgetSpec status:PodDisruptionBudgetStatus",
    "PodDisruptionBudgetSpec": "maxUnavailable:x minAvailable:x selector:LabelSelector unhealthyPodEvictionPolicy:s",
    "Ingress": "apiVersion:s kind:s metadata:ObjectMeta spec:IngressSpec status:IngressStatus",
    "IngressSpec": "defaultBackend:IngressBackend ingressClassName:s rules:a/IngressRule tls:a/IngressTLS",
    "IngressRule": "host:s http:HTTPIngressRuleValue",
    "HTTPIngressRuleValue": "!paths:a/HTTPIngressPath",
    "HTTPIngressPath": "!backend:IngressBackend path:s !pathType:s",
    "IngressBackend": "resource:TypedLocalObjectReference service:IngressServiceBackend",
    "IngressServiceBackend": "!name:s port:ServiceBackendPort",
    "ServiceBackendPort": "name:s number:i",
    "IngressTLS": "hosts:a/s secretName:s",
    "TypedLocalObjectReference": "apiGroup:s !kind:s !name:s",
    "ObjectMeta": "annotations:m/s creationTimestamp:s deletionGracePeriodSeconds:i deletionTimestamp:s finalizers:a/s generateName:s generation:i labels:m/s managedFields:a/ManagedFieldsEntry name:s namespace:s ownerReferences:a/OwnerReference resourceVersion:s selfLink:s uid:s",
    "LabelSelector": "matchExpressions:a/LabelSelectorRequirement matchLabels:m/s",
    "LabelSelectorRequirement": "!key:s !operator:s values:a/s",
}


FAILS = 0


def check(ok, msg):
    global FAILS
    print(("ok:   " if ok else "FAIL: ") + msg)
    if not ok:
        FAILS += 1
    return ok


def note(msg):
    print("note: " + msg)


# ---- the schema walk ----
def parse_schema():
    out = {}
    for name, spec in SCHEMA.items():
        fields = {}
        for tok in spec.split():
            req = tok.startswith("!")
            field, kind = tok.lstrip("!").split(":", 1)
            fields[field] = (kind, req)
        out[name] = fields
    return out


TYPES = parse_schema()
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$")


def walk(value, kind, path, errors, unchecked):
    if value is None:
        return
    if kind == "s":
        if not isinstance(value, str):
            errors.append(f"{path}: a string expected, got {value!r}")
    elif kind == "i":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{path}: an integer expected, got {value!r}")
    elif kind == "b":
        if not isinstance(value, bool):
            errors.append(f"{path}: true or false expected, got {value!r}")
    elif kind == "x":
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            errors.append(f"{path}: an integer or a string expected, got {value!r}")
    elif kind == "q":
        if isinstance(value, bool) or not QUANTITY.match(str(value)):
            errors.append(f"{path}: not a quantity: {value!r}")
    elif kind.startswith("a/"):
        if not isinstance(value, list):
            errors.append(f"{path}: a list expected")
        else:
            for i, v in enumerate(value):
                walk(v, kind[2:], f"{path}[{i}]", errors, unchecked)
    elif kind.startswith("m/"):
        if not isinstance(value, dict):
            errors.append(f"{path}: a map expected")
        else:
            for k, v in value.items():
                walk(v, kind[2:], f"{path}.{k}", errors, unchecked)
    elif kind in TYPES:
        if not isinstance(value, dict):
            errors.append(f"{path}: an object ({kind}) expected")
            return
        fields = TYPES[kind]
        for k, v in value.items():
            if k not in fields:
                errors.append(f"{path}.{k}: no such field in {kind}")
            else:
                walk(v, fields[k][0], f"{path}.{k}", errors, unchecked)
        for k, (_, req) in fields.items():
            if req and value.get(k) is None:
                errors.append(f"{path}.{k}: required by {kind}")
    else:
        unchecked.append(f"{path} ({kind})")

def parse_quantity(q):
    s = str(q)
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2 ** 10, "Mi": 2 ** 20,
             "Gi": 2 ** 30, "Ti": 2 ** 40}
    for u in sorted(units, key=len, reverse=True):
        if s.endswith(u):
            return float(s[: -len(u)]) * units[u]
    return float(s)


def failures():
    """How many checks failed so far."""
    return FAILS


def check_hardened(tag, name, pspec, c):
    """The container c of pod spec pspec runs as a non-root uid, cannot escalate, has dropped every
    capability, a read-only root filesystem, a seccomp profile, and requests and limits of cpu and
    memory (requests <= limits)."""
    psc, csc = pspec.get("securityContext") or {}, c.get("securityContext") or {}
    non_root = csc.get("runAsNonRoot", psc.get("runAsNonRoot"))
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    check(non_root is True and uid not in (None, 0), f"{tag}: {name}: runAsNonRoot with uid {uid}")
    check(csc.get("allowPrivilegeEscalation") is False, f"{tag}: {name}: allowPrivilegeEscalation: false")
    check("ALL" in ((csc.get("capabilities") or {}).get("drop") or []) and not (csc.get("capabilities") or {}).get("add"),
          f"{tag}: {name}: capabilities: drop ALL, add none")
    check(csc.get("readOnlyRootFilesystem") is True, f"{tag}: {name}: readOnlyRootFilesystem")
    seccomp = (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    check(seccomp in ("RuntimeDefault", "Localhost"), f"{tag}: {name}: seccompProfile {seccomp}")
    res = c.get("resources") or {}
    req, lim = res.get("requests") or {}, res.get("limits") or {}
    ok = all(r in req and r in lim for r in ("cpu", "memory"))
    if ok:
        ok = all(parse_quantity(req[r]) <= parse_quantity(lim[r]) for r in ("cpu", "memory"))
    check(ok, f"{tag}: {name}: requests and limits of cpu and memory, requests <= limits ({req} / {lim})")
