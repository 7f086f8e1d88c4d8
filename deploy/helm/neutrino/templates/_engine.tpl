{{/* The engine beside Neutrino, on the socket in the shared volume. */}}
{{- define "neutrino.engineCommand" -}}
{{- $e := .Values.engine -}}
{{- $socket := "/run/neutrino/engine.sock" -}}
{{- if eq $e.kind "llamacpp" -}}
{{- $cmd := list "python" "-m" "neutrino.engines.llamacpp" "--socket" $socket "--gguf" (printf "/models/%s" $e.model.path) "--model" $e.model.name "--ctx" (toString $e.contextLength) "--slots" (toString $e.slots) "--threads" (toString $e.threads) -}}
{{- if gt (int $e.gpus) 0 -}}
{{- $cmd = concat $cmd (list "--gpu-layers" "999") -}}
{{- end -}}
{{- toYaml (concat $cmd $e.args) -}}
{{- else if eq $e.kind "vllm" -}}
{{- toYaml (concat (list "python" "-m" "neutrino.engines.vllm" "--socket" $socket "--model-dir" (printf "/models/%s" $e.model.path) "--served-name" $e.model.name "--max-model-len" (toString $e.contextLength) "--max-num-seqs" (toString $e.slots)) $e.args) -}}
{{- else if eq $e.kind "custom" -}}
{{- if not $e.command -}}
{{- fail "engine.kind = custom needs engine.command" -}}
{{- end -}}
{{- $out := list -}}
{{- range $e.command -}}
{{- $out = append $out (. | replace "{socket}" $socket) -}}
{{- end -}}
{{- toYaml (concat $out $e.args) -}}
{{- else -}}
{{- fail (printf "engine.kind must be llamacpp, vllm or custom, not %q" $e.kind) -}}
{{- end -}}
{{- end -}}

{{- define "neutrino.engineContainer" -}}
{{- $e := .Values.engine -}}
- name: engine
  image: {{ include "neutrino.imageOr" (dict "image" $e.image "root" .) }}
  imagePullPolicy: {{ $e.image.pullPolicy }}
  command:
    {{- include "neutrino.engineCommand" . | nindent 4 }}
  {{- with $e.env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop: ["ALL"]
    {{- with $e.securityContext }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or $e.resources (gt (int $e.gpus) 0) }}
  resources:
    {{- $res := deepCopy ($e.resources | default dict) }}
    {{- if gt (int $e.gpus) 0 }}
    {{- $limits := merge (dict "nvidia.com/gpu" (int $e.gpus)) (get $res "limits" | default dict) }}
    {{- $_ := set $res "limits" $limits }}
    {{- end }}
    {{- toYaml $res | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: sockets
      mountPath: /run/neutrino
    - name: models
      mountPath: /models
      readOnly: true
    - name: tmp
      mountPath: /tmp
{{- end -}}
