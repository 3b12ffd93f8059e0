{{/* Labels of every object and pod template (selectors use app.kubernetes.io/name). */}}
{{- define "gvirtus.selectorLabels" -}}
app.kubernetes.io/name: {{ .name }}
{{- end }}

{{- define "gvirtus.podLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: gvirtus
{{- end }}

{{/* Object labels: the pod labels and Helm's own. Call with (dict "root" $ "name" .. "component" ..). */}}
{{- define "gvirtus.labels" -}}
{{ include "gvirtus.podLabels" . }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "gvirtus.namespace" -}}
{{ .Values.namespace.name }}
{{- end }}

{{/* <registry>/<prefix>/<component>:<tag>. Call with (dict "root" $ "component" ..). */}}
{{- define "gvirtus.image" -}}
{{- $image := .root.Values.image -}}
{{- with $image.registry }}{{ . }}/{{ end }}{{ $image.repositoryPrefix }}/{{ .component }}:{{ $image.tag | default .root.Chart.AppVersion }}
{{- end }}

{{/* NODE_NAME, POD_NAME, POD_NAMESPACE from the downward API. */}}
{{- define "gvirtus.downwardEnv" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}

{{/* The pod-level fields every component shares: pull secrets, node selector, tolerations,
priority. Call with (dict "root" $ "values" .Values.<component>). */}}
{{- define "gvirtus.podPlacement" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}

{{- define "gvirtus.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: http-metrics
  {{- if .startup }}
  periodSeconds: 20
  failureThreshold: 3
startupProbe:
  httpGet:
    path: /healthz
    port: http-metrics
  periodSeconds: 2
  failureThreshold: 30
readinessProbe:
  httpGet:
    path: /readyz
    port: http-metrics
  periodSeconds: 5
  failureThreshold: 2
  {{- else }}
  initialDelaySeconds: 5
  periodSeconds: 20
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: http-metrics
  periodSeconds: 10
  {{- end }}
{{- end }}

{{- define "gvirtus.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: ["ALL"]
{{- end }}

{{- define "gvirtus.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}
