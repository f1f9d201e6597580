{{- /* This chart's constants: the code hard-codes them (edge/controller, edge/cli). */ -}}
{{- define "fairlead.module" -}}alb{{- end }}
{{- define "fairlead.namespace" -}}d8-alb{{- end }}
