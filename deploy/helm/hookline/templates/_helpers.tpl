{{- define "hookline.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hookline.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "hookline.secretName" -}}
{{- if .Values.existingSecret -}}{{ .Values.existingSecret }}{{- else -}}{{ include "hookline.fullname" . }}{{- end -}}
{{- end -}}

{{/* The environment every Hookline container gets. */}}
{{- define "hookline.env" -}}
- name: HOOKLINE_DATABASE_URL
  value: {{ .Values.databaseUrl | quote }}
- name: HOOKLINE_LISTEN
  value: "0.0.0.0:8080"
{{- end -}}

{{- define "hookline.envFrom" -}}
- configMapRef:
    name: {{ include "hookline.fullname" . }}
- secretRef:
    name: {{ include "hookline.secretName" . }}
{{- end -}}

{{/* Probes: alive = the process answers; ready = database, migrations, dispatcher loop. */}}
{{- define "hookline.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 5
  failureThreshold: 3
{{- end -}}
