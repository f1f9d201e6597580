{{- /* This chart's constants: the code hard-codes them (health/src/rbac.rs). */ -}}
{{- define "fairlead.module" -}}service-with-healthchecks{{- end }}
{{- define "fairlead.namespace" -}}d8-service-with-healthchecks{{- end }}
