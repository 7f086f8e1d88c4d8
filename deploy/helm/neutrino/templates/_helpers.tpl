{{/* Names and labels. */}}
{{- define "neutrino.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "neutrino.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "neutrino.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "neutrino.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "neutrino.selector" -}}
app.kubernetes.io/name: {{ include "neutrino.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "neutrino.agentSelector" -}}
app.kubernetes.io/name: {{ include "neutrino.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node-agent
{{- end -}}

{{- define "neutrino.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* An image of its own, else Neutrino's: (dict "image" .Values.x.image "root" $). */}}
{{- define "neutrino.imageOr" -}}
{{- if .image.repository -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion) -}}
{{- else -}}
{{- include "neutrino.image" .root -}}
{{- end -}}
{{- end -}}

{{- define "neutrino.secretName" -}}
{{- .Values.existingSecret | default (printf "%s-secrets" (include "neutrino.fullname" .)) -}}
{{- end -}}

{{- define "neutrino.agentsService" -}}
{{- printf "%s-node" (include "neutrino.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "neutrino.terminationGrace" -}}
{{- add .Values.shutdown.graceSeconds .Values.shutdown.preStopSeconds 10 -}}
{{- end -}}

{{/*
Neutrino's configuration: the values' config, and the sections the chart owns. Rendered
by toToml (a whole number comes out as 1024.0, which Neutrino reads as 1024).
*/}}
{{- define "neutrino.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $_ := set $cfg "shutdown" (merge (dict "grace_s" .Values.shutdown.graceSeconds) (get $cfg "shutdown" | default dict)) -}}
{{- if or .Values.apiKeys .Values.existingSecret -}}
{{- $auth := get $cfg "auth" | default dict -}}
{{- $_ := set $auth "api_keys_file" "/etc/neutrino/secrets/api-keys" -}}
{{- $_ := set $cfg "auth" $auth -}}
{{- end -}}
{{- if .Values.engine.enabled -}}
{{- $engines := get $cfg "engines" | default list -}}
{{- $_ := set $cfg "engines" (append $engines (dict "name" "sidecar" "socket" "/run/neutrino/engine.sock")) -}}
{{- end -}}
{{- if .Values.etcd.endpoints -}}
{{- $_ := set $cfg "discovery" (merge (dict "etcd" .Values.etcd.endpoints "prefix" .Values.etcd.prefix) (get $cfg "discovery" | default dict)) -}}
{{- end -}}
{{- if .Values.nodeAgent.enabled -}}
{{- $fleet := merge (dict "token_file" "/etc/neutrino/secrets/node-token") (deepCopy .Values.nodeAgent.fleet) -}}
{{- if eq .Values.nodeAgent.discovery "etcd" -}}
{{- $_ := set $fleet "etcd" .Values.etcd.endpoints -}}
{{- else -}}
{{- $_ := set $fleet "dns" (list (printf "%s.%s.svc.cluster.local:%v" (include "neutrino.agentsService" .) .Release.Namespace .Values.nodeAgent.port)) -}}
{{- end -}}
{{- $_ := set $cfg "fleet" $fleet -}}
{{- if .Values.nodeAgent.catalogue -}}
{{- $_ := set $cfg "catalogue" .Values.nodeAgent.catalogue -}}
{{- end -}}
{{- end -}}
{{- toToml $cfg -}}
{{- end -}}
