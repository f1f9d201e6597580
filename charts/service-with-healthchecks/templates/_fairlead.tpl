{{- /*
Helpers shared by fairlead's charts (charts/alb/templates/_fairlead.tpl is a symlink to this
file). A chart defines its own constants in _module.tpl:
  "fairlead.module"     the Deckhouse module name (label `module`)
  "fairlead.namespace"  the module's fixed namespace
A component is a template that calls these helpers with a dict:
  (dict "root" $ "component" "controller")
so adding a component is adding a template and its values.
*/ -}}

{{- define "fairlead.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- /* The labels a component's pods are selected by. */ -}}
{{- define "fairlead.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- /* Every object's labels: Kubernetes' recommended ones and Deckhouse's. */ -}}
{{- define "fairlead.labels" -}}
{{ include "fairlead.selectorLabels" . }}
app.kubernetes.io/part-of: fairlead
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ include "fairlead.chart" .root }}
heritage: deckhouse
module: {{ include "fairlead.module" .root }}
{{- end }}

{{- /* An image reference from {repository, tag, digest}: the digest wins; the tag defaults to
the chart's appVersion. (dict "root" $ "image" .Values.image) */ -}}
{{- define "fairlead.image" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- /* The flags every fairlead component takes (clap globals, so after the subcommand). */ -}}
{{- define "fairlead.globalArgs" -}}
- --log-format
- json
{{- with .Values.logLevel }}
- --log-level
- {{ . | quote }}
{{- end }}
{{- end }}

{{- /* The environment of every fairlead container: its identity (Leases, logs) and the OTLP
collector when tracing is on. */ -}}
{{- define "fairlead.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- with .Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{- /* Every container: non-root, nothing to escalate to, read-only root. */ -}}
{{- define "fairlead.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 64535
runAsGroup: 64535
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- /* The pod-level fields every pod shares: pull secrets, security context. */ -}}
{{- define "fairlead.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}

{{- /* Preferred anti-affinity by node for a component's replicas, unless `affinity` is given.
(dict "root" $ "component" "controller" "affinity" .Values.controller.affinity) */ -}}
{{- define "fairlead.affinity" -}}
{{- if .affinity -}}
{{ toYaml .affinity }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "fairlead.selectorLabels" . | nindent 12 }}
{{- end -}}
{{- end }}

{{- /*
kube-rbac-proxy in front of a component's loopback admin server. `upstreams` is a list, one
entry per guarded upstream, so a new one (a graph API, …) is a new entry:
  (dict "name" "metrics" "path" "/metrics" "upstream" "http://127.0.0.1:8080/"
        "port" 7475 "portName" "https-metrics"
        "resource" "deployments" "resourceName" "controller")
optional: "subresource" (default prometheus-metrics), "allowPaths" (default path),
"apiGroup" (default apps).
Flavour `upstream` (brancz/kube-rbac-proxy, one upstream per process): one container per
entry, each on its own port, authorized by its `--config-file` (key `<name>.yaml` of the
component's ConfigMap). Flavour `deckhouse` (Deckhouse's fork): one container on the first
entry's port serving every entry by path, configured by KUBE_RBAC_PROXY_CONFIG.
Called as (dict "root" $ "name" "controller" "upstreams" $upstreams).
*/ -}}
{{- define "fairlead.kubeRbacProxy.attributes" -}}
namespace: {{ include "fairlead.namespace" .root }}
apiGroup: {{ .upstream.apiGroup | default "apps" }}
apiVersion: v1
resource: {{ .upstream.resource }}
subresource: {{ .upstream.subresource | default "prometheus-metrics" }}
name: {{ .upstream.resourceName }}
{{- end }}

{{- define "fairlead.kubeRbacProxy.configMapName" -}}
{{ .name }}-kube-rbac-proxy
{{- end }}

{{- /* The ConfigMap of the upstream flavour's config files (nothing for the fork's). */ -}}
{{- define "fairlead.kubeRbacProxy.configMap" -}}
{{- $root := .root -}}
{{- if eq $root.Values.kubeRbacProxy.flavour "upstream" }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "fairlead.kubeRbacProxy.configMapName" . }}
  namespace: {{ include "fairlead.namespace" $root }}
  labels:
    {{- include "fairlead.labels" (dict "root" $root "component" .component) | nindent 4 }}
data:
  {{- range .upstreams }}
  {{ .name }}.yaml: |
    authorization:
      resourceAttributes:
        {{- include "fairlead.kubeRbacProxy.attributes" (dict "root" $root "upstream" .) | nindent 8 }}
  {{- end }}
{{- end }}
{{- end }}

{{- /* A checksum of the configuration, for the pod template (a change rolls the pods). */ -}}
{{- define "fairlead.kubeRbacProxy.checksum" -}}
{{- $root := .root -}}
{{- $text := list $root.Values.kubeRbacProxy.flavour -}}
{{- range .upstreams }}{{ $text = append $text (toJson .) }}{{ end -}}
{{- $text | join "," | sha256sum -}}
{{- end }}

{{- define "fairlead.kubeRbacProxy.container" -}}
{{- $root := .root -}}
{{- $krp := $root.Values.kubeRbacProxy -}}
image: {{ include "fairlead.image" (dict "root" $root "image" $krp.image) }}
imagePullPolicy: {{ $krp.image.pullPolicy }}
resources:
  {{- toYaml $krp.resources | nindent 2 }}
securityContext:
  {{- include "fairlead.containerSecurityContext" . | nindent 2 }}
{{- end }}

{{- define "fairlead.kubeRbacProxy.containers" -}}
{{- $root := .root -}}
{{- $ctx := . -}}
{{- if eq $root.Values.kubeRbacProxy.flavour "deckhouse" }}
{{- $first := first .upstreams }}
- name: kube-rbac-proxy
  {{- include "fairlead.kubeRbacProxy.container" $ctx | nindent 2 }}
  args:
    - --secure-listen-address=$(POD_IP):{{ $first.port }}
    - --v=2
    - --logtostderr=true
    - --stale-cache-interval=1h30m
    - --livez-path=/livez
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: KUBE_RBAC_PROXY_CONFIG
      value: |
        upstreams:
        {{- range $u := .upstreams }}
        {{- range ($u.paths | default (list $u.path)) }}
          - upstream: {{ trimSuffix "/" $u.upstream }}{{ . }}
            path: {{ . }}
            authorization:
              resourceAttributes:
                {{- include "fairlead.kubeRbacProxy.attributes" (dict "root" $root "upstream" $u) | nindent 16 }}
        {{- end }}
        {{- end }}
  ports:
    - name: {{ $first.portName }}
      containerPort: {{ $first.port }}
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /livez
      port: {{ $first.port }}
      scheme: HTTPS
  readinessProbe:
    httpGet:
      path: /livez
      port: {{ $first.port }}
      scheme: HTTPS
{{- else }}
{{- range $i, $u := .upstreams }}
- name: kube-rbac-proxy{{ if $i }}-{{ $u.name }}{{ end }}
  {{- include "fairlead.kubeRbacProxy.container" $ctx | nindent 2 }}
  args:
    - --secure-listen-address=$(POD_IP):{{ $u.port }}
    - --upstream={{ $u.upstream }}
    - --config-file=/etc/kube-rbac-proxy/{{ $u.name }}.yaml
    - --auth-header-fields-enabled
    - --allow-paths={{ $u.allowPaths | default $u.path }}
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
  ports:
    - name: {{ $u.portName }}
      containerPort: {{ $u.port }}
      protocol: TCP
  volumeMounts:
    - name: kube-rbac-proxy-config
      mountPath: /etc/kube-rbac-proxy
      readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{- /* The volume of the upstream flavour's config files. */ -}}
{{- define "fairlead.kubeRbacProxy.volumes" -}}
{{- if eq .root.Values.kubeRbacProxy.flavour "upstream" }}
- name: kube-rbac-proxy-config
  configMap:
    name: {{ include "fairlead.kubeRbacProxy.configMapName" . }}
{{- end }}
{{- end }}

{{- /* Scraping through kube-rbac-proxy: the scraper's token, kube-rbac-proxy's self-signed
certificate, `job` set to what the alerts select. (dict "root" $ "job" "…" "path" "/metrics"
"extraRelabelings" list) */ -}}
{{- define "fairlead.podMonitor.endpoint" -}}
{{- $m := .root.Values.monitoring -}}
- port: https-metrics
  path: {{ .path | default "/metrics" }}
  scheme: https
  {{- with $m.interval }}
  interval: {{ . }}
  {{- end }}
  authorization:
    type: Bearer
    credentials:
      name: {{ $m.scraper.tokenSecret.name }}
      key: {{ $m.scraper.tokenSecret.key }}
  tlsConfig:
    insecureSkipVerify: true
  relabelings:
    - action: replace
      targetLabel: job
      replacement: {{ .job }}
    {{- with .extraRelabelings }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{- /* Where the PodMonitors live: the scraper's namespace, beside its token Secret (a
PodMonitor's credentials are read from its own namespace). */ -}}
{{- define "fairlead.podMonitor.namespace" -}}
{{ .Values.monitoring.scraper.namespace }}
{{- end }}

{{- define "fairlead.podMonitor.labels" -}}
{{ include "fairlead.labels" . }}
{{- with .root.Values.monitoring.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- /* A Grafana dashboard ConfigMap (the sidecar convention: a label marks it).
(dict "root" $ "name" "health" "file" "files/dashboards/health.json") */ -}}
{{- define "fairlead.dashboard" -}}
{{- $d := .root.Values.monitoring.dashboards -}}
{{- $json := .root.Files.Get .file -}}
{{- if not $json }}{{ fail (printf "%s is missing or empty (a broken symlink?)" .file) }}{{ end }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: fairlead-dashboard-{{ .name }}
  namespace: {{ $d.namespace | default (include "fairlead.namespace" .root) }}
  labels:
    {{- include "fairlead.labels" (dict "root" .root "component" "monitoring") | nindent 4 }}
    {{ $d.label.name }}: {{ $d.label.value | quote }}
  {{- with $d.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  {{ base .file }}: |
    {{- $json | nindent 4 }}
{{- end }}

{{- /* The `groups` of the alert files, concatenated in order. (list $ "files/alerts/a.yaml" …) */ -}}
{{- define "fairlead.alertGroups" -}}
{{- $root := first . -}}
{{- $groups := list -}}
{{- range rest . }}
{{- $text := $root.Files.Get . -}}
{{- if not $text }}{{ fail (printf "%s is missing or empty (a broken symlink?)" .) }}{{ end }}
{{- $doc := fromYaml $text -}}
{{- if hasKey $doc "Error" }}{{ fail (printf "%s: %s" . $doc.Error) }}{{ end }}
{{- $groups = concat $groups $doc.groups -}}
{{- end }}
{{- toYaml $groups -}}
{{- end }}

{{- /* Egress every component needs: DNS and the API server. */ -}}
{{- define "fairlead.networkPolicy.baseEgress" -}}
{{- $np := .Values.networkPolicy -}}
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
- ports:
    {{- range $np.apiServer.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  {{- with $np.apiServer.cidrs }}
  to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  {{- end }}
{{- end }}
