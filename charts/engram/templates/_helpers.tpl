{{/*
Names. The prefix is cut to 40 characters so that the longest derived name
("<fullname>-qdrant-headless") and the StatefulSet pod names stay within 63.
*/}}
{{- define "engram.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "engram.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "engram.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource names shared with the operator, the Jobs and the tests. */}}
{{- define "engram.qdrantName" -}}{{ include "engram.fullname" . }}-qdrant{{- end -}}
{{- define "engram.qdrantHeadlessName" -}}{{ include "engram.fullname" . }}-qdrant-headless{{- end -}}
{{- define "engram.mcpHeadlessName" -}}{{ include "engram.fullname" . }}-headless{{- end -}}
{{- define "engram.operatorName" -}}{{ include "engram.fullname" . }}-operator{{- end -}}
{{- define "engram.maintenanceName" -}}{{ include "engram.fullname" . }}-maintenance{{- end -}}
{{- define "engram.envConfigMapName" -}}{{ include "engram.fullname" . }}-env{{- end -}}
{{- define "engram.permissionsConfigMapName" -}}{{ include "engram.fullname" . }}-permissions{{- end -}}
{{- define "engram.backupClaimName" -}}{{ include "engram.fullname" . }}-backups{{- end -}}

{{/*
The Secret holding ENGRAM_STORE__API_KEY: the generated one, an existing one, or none
(external Qdrant without a key). Loaded with envFrom by the service and the Jobs.
*/}}
{{- define "engram.qdrantSecretName" -}}
{{- if .Values.qdrant.enabled -}}
{{- default (printf "%s-qdrant" (include "engram.fullname" .)) .Values.qdrant.apiKey.existingSecret -}}
{{- else -}}
{{- .Values.qdrant.external.existingSecret -}}
{{- end -}}
{{- end -}}

{{/*
Provider API keys, as a YAML map: environment variable -> {name, key} of an existing Secret.
The service gets them as secretKeyRefs; the operator passes the same references (names only,
never the keys) to the maintenance Jobs through ENGRAM_OPERATOR_JOB_SECRET_ENV.
*/}}
{{- define "engram.providerKeyRefs" -}}
{{- $refs := dict -}}
{{- range $role, $p := dict "PRIMARY" .Values.embeddings.primary "FALLBACK" .Values.embeddings.fallback -}}
{{- if and $p.provider $p.apiKeySecret.name -}}
{{- $_ := set $refs (printf "ENGRAM_EMBEDDINGS__%s__API_KEY" $role) (dict "name" $p.apiKeySecret.name "key" $p.apiKeySecret.key) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.llm.provider .Values.llm.apiKeySecret.name -}}
{{- $_ := set $refs "ENGRAM_LLM__PRIMARY__API_KEY" (dict "name" .Values.llm.apiKeySecret.name "key" .Values.llm.apiKeySecret.key) -}}
{{- end -}}
{{- toYaml $refs -}}
{{- end -}}

{{/* The Qdrant URL the service and the Jobs use. */}}
{{- define "engram.qdrantUrl" -}}
{{- if .Values.qdrant.enabled -}}
{{- printf "http://%s.%s.svc:6333" (include "engram.qdrantName" .) .Release.Namespace -}}
{{- else -}}
{{- required "qdrant.external.url is required when qdrant.enabled is false" .Values.qdrant.external.url -}}
{{- end -}}
{{- end -}}

{{/*
The Qdrant API key: the one already stored in the release's Secret (so upgrades keep it),
else a new random one. Takes the `lookup` result as "existing" so it can be tested offline.
*/}}
{{- define "engram.qdrantApiKey" -}}
{{- $data := dig "data" (dict) (.existing | default (dict)) -}}
{{- if hasKey $data "ENGRAM_STORE__API_KEY" -}}
{{- index $data "ENGRAM_STORE__API_KEY" | b64dec -}}
{{- else -}}
{{- randAlphaNum 48 -}}
{{- end -}}
{{- end -}}

{{/* Labels: pass (dict "ctx" $ "component" "<name>"). */}}
{{- define "engram.labels" -}}
helm.sh/chart: {{ include "engram.chart" .ctx }}
{{ include "engram.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: engram
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "engram.selectorLabels" -}}
app.kubernetes.io/name: {{ include "engram.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Images. */}}
{{/*
Images: "repository:tag", or "repository:tag@digest" when a digest is set: the digest pins what
runs, the tag says what it is (the kubelet pulls by digest and ignores the tag).
*/}}
{{- define "engram.imageRef" -}}
{{- if .digest -}}
{{- printf "%s:%s@%s" .repository .tag .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}

{{- define "engram.image" -}}
{{- $i := .Values.image -}}
{{- include "engram.imageRef" (dict "repository" $i.repository "tag" (default .Chart.AppVersion $i.tag) "digest" $i.digest) -}}
{{- end -}}

{{- define "engram.qdrantImage" -}}
{{- $i := .Values.qdrant.image -}}
{{- include "engram.imageRef" (dict "repository" $i.repository "tag" $i.tag "digest" $i.digest) -}}
{{- end -}}

{{/*
Restricted pod security (Pod Security Standards "restricted"). Pass the UID; the group and
fsGroup equal it.
*/}}
{{- define "engram.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ . }}
runAsGroup: {{ . }}
fsGroup: {{ . }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "engram.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The UID baked into the Engram image (Dockerfile USER). */}}
{{- define "engram.uid" -}}10001{{- end -}}

{{/* Qdrant runs as the UID its official chart uses; the volumes are group-owned by fsGroup. */}}
{{- define "engram.qdrantUid" -}}1000{{- end -}}

{{/* Custom resources render only when their CRDs are there and the operator acts on them. */}}
{{- define "engram.renderCustomResources" -}}
{{- if and .Values.crds.installed .Values.operator.enabled -}}true{{- end -}}
{{- end -}}

{{/* Refuse combinations that would deploy something broken. */}}
{{- define "engram.validate" -}}
{{- if and (not .Values.auth.enabled) (not .Values.auth.insecureNoAuth) -}}
{{- fail "auth.enabled=false serves memories to anyone who reaches the Service: also set auth.insecureNoAuth=true to confirm" -}}
{{- end -}}
{{- if and .Values.qdrant.enabled (gt (int .Values.qdrant.replicas) 1) (not .Values.qdrant.distributed.enabled) -}}
{{- fail "qdrant.replicas > 1 needs qdrant.distributed.enabled=true (separate standalone pods would each hold different data)" -}}
{{- end -}}
{{- if gt (int .Values.qdrant.distributed.replicationFactor) (int .Values.qdrant.replicas) -}}
{{- fail "qdrant.distributed.replicationFactor must not exceed qdrant.replicas" -}}
{{- end -}}
{{- if gt (int .Values.qdrant.distributed.writeConsistencyFactor) (int .Values.qdrant.distributed.replicationFactor) -}}
{{- fail "qdrant.distributed.writeConsistencyFactor must not exceed qdrant.distributed.replicationFactor" -}}
{{- end -}}
{{- if and .Values.mcp.ingress.enabled (not .Values.mcp.ingress.hosts) -}}
{{- fail "mcp.ingress.hosts needs at least one host when the Ingress is enabled" -}}
{{- end -}}
{{- if and (not .Values.qdrant.enabled) (not .Values.qdrant.external.url) -}}
{{- fail "qdrant.external.url is required when qdrant.enabled is false" -}}
{{- end -}}
{{- range .Values.extraEnv -}}
{{- if regexMatch "(?i)(API_?KEY|TOKEN|PASSWORD|PASSWD|SECRET|CREDENTIAL|PRIVATE_?KEY)" .name -}}
{{- fail (printf "extraEnv[%s]: names like *API_KEY*, *TOKEN*, *PASSWORD*, *SECRET* are refused: extraEnv lands in a ConfigMap in plain text. Put the value in a Secret and reference it: embeddings.primary.apiKeySecret, embeddings.fallback.apiKeySecret, llm.apiKeySecret, qdrant.apiKey.existingSecret (or qdrant.external.existingSecret)" .name) -}}
{{- end -}}
{{- end -}}
{{- if .Values.qdrant.enabled -}}
{{- $s := .Values.qdrant.snapshots -}}
{{- $room := include "engram.mebibytes" $s.size | float64 -}}
{{- $one := include "engram.mebibytes" .Values.qdrant.persistence.size | float64 -}}
{{- $need := mulf (add1 (int $s.keepOnServer)) $one -}}
{{- if lt $room $need -}}
{{- fail (printf "qdrant.snapshots.size (%s) is too small: during a backup Qdrant holds qdrant.snapshots.keepOnServer (%d) older snapshots plus the new one, each up to the data volume (qdrant.persistence.size %s); it needs at least %.0fMi, or the kubelet evicts Qdrant. Raise qdrant.snapshots.size or lower keepOnServer (0 streams each snapshot to the backup volume and deletes it from Qdrant)" (toString $s.size) (int $s.keepOnServer) (toString .Values.qdrant.persistence.size) $need) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A storage quantity (schema "quantity": Ki/Mi/Gi/Ti/Pi/Ei, k/M/G/T/P/E or bytes) in MiB, for the
size checks above (Helm has no quantity arithmetic).
*/}}
{{- define "engram.mebibytes" -}}
{{- $q := toString . -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $unit := trimPrefix $num $q -}}
{{- $per := dict "" 0.00000095367431640625 "m" 0.00000000095367431640625 "Ki" 0.0009765625 "Mi" 1.0 "Gi" 1024.0 "Ti" 1048576.0 "Pi" 1073741824.0 "Ei" 1099511627776.0 "k" 0.00095367431640625 "M" 0.95367431640625 "G" 953.67431640625 "T" 953674.31640625 "P" 953674316.40625 "E" 953674316406.25 -}}
{{- mulf (float64 $num) (index $per $unit) -}}
{{- end -}}

{{/*
What the helm test pod can check: "off" (no auth), "token" (agent tokens only),
"kubernetes" (its ServiceAccount is bound by the chart's test EngramAgent) or
"kubernetes-unbound" (no operator to bind it: expect TokenReview to pass and the binding to fail).
*/}}
{{- define "engram.testAuthMode" -}}
{{- if not .Values.auth.enabled -}}
off
{{- else if not .Values.auth.kubernetes.enabled -}}
token
{{- else if include "engram.renderCustomResources" . -}}
kubernetes
{{- else -}}
kubernetes-unbound
{{- end -}}
{{- end -}}

{{/*
Namespaces the operator watches, as a sorted JSON list: the release namespace and
operator.watchNamespaces (without repeats).
*/}}
{{- define "engram.watchNamespaces" -}}
{{- $out := list .Release.Namespace -}}
{{- range .Values.operator.watchNamespaces -}}
{{- if not (has . $out) -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toJson (sortAlpha $out) -}}
{{- end -}}

{{/*
Name of a cluster-scoped object: "<namespace>:<fullname>-<suffix>". Namespaces cannot contain
":", so releases with one name in two namespaces never collide.
*/}}
{{- define "engram.clusterScopedName" -}}
{{- printf "%s:%s-%s" .ctx.Release.Namespace (include "engram.fullname" .ctx) .suffix -}}
{{- end -}}

{{/* How the chart's own custom resources name their release (spec.release). */}}
{{- define "engram.releaseRef" -}}
{{- printf "%s/%s" .Release.Namespace .Release.Name -}}
{{- end -}}

{{/* The operator's rules in every watched namespace (engram_operator.rbac.WATCHED_RULES). */}}
{{- define "engram.operatorWatchedRules" -}}
- apiGroups: [engram.dev]
  resources: [engramagents, engrammaintenances]
  verbs: [list, watch, patch]
- apiGroups: [engram.dev]
  resources: [engramagents/status, engrammaintenances/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/* The uninstall hook's rules (engram_operator.rbac.UNINSTALL_RULES). */}}
{{- define "engram.uninstallRules" -}}
- apiGroups: [engram.dev]
  resources: [engramagents, engrammaintenances]
  verbs: [list, delete, patch]
{{- end -}}
