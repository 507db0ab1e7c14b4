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
{{- define "engram.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "engram.qdrantImage" -}}
{{- if .Values.qdrant.image.digest -}}
{{- printf "%s@%s" .Values.qdrant.image.repository .Values.qdrant.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.qdrant.image.repository .Values.qdrant.image.tag -}}
{{- end -}}
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
