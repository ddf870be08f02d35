{{/* The chart's name, possibly overridden. */}}
{{- define "edgeq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full name of the release's objects: RELEASE-edgeq, or the release's name when it holds "edgeq". */}}
{{- define "edgeq.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "edgeq.adminServiceName" -}}
{{- printf "%s-admin" (include "edgeq.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "edgeq.redisName" -}}
{{- printf "%s-redis" (include "edgeq.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "edgeq.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "edgeq.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: edgeq
{{- end -}}

{{- define "edgeq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "edgeq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "edgeq.redisSelectorLabels" -}}
app.kubernetes.io/name: redis
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: trial-redis
{{- end -}}

{{/* The image, named by version: the tag defaults to the chart's appVersion. */}}
{{- define "edgeq.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- if .Values.image.digest -}}
{{- $ref = printf "%s@%s" $ref .Values.image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* Where the configuration and the signing key are mounted. The ConfigMap is the whole /etc/edgeq
directory (never a subPath mount, which would not see updates); the keys live beside it, not inside. */}}
{{- define "edgeq.configDir" -}}/etc/edgeq{{- end -}}
{{- define "edgeq.keysDir" -}}/etc/edgeq-keys{{- end -}}
{{- define "edgeq.signingKeyFile" -}}{{ include "edgeq.keysDir" . }}/signing.pem{{- end -}}
{{- define "edgeq.httpPort" -}}8080{{- end -}}
{{- define "edgeq.adminPort" -}}9090{{- end -}}

{{/* The secrets passed as EDGEQ_* environment variables: value name -> variable. */}}
{{- define "edgeq.secretEnv" -}}
adminApiKey: EDGEQ_ADMIN_API_KEY
identitySecret: EDGEQ_IDENTITY_SECRET
redisPassword: EDGEQ_REDIS_PASSWORD
turnstileSecretKey: EDGEQ_TURNSTILE_SECRET_KEY
ledgerPostgresURL: EDGEQ_LEDGER_POSTGRES_URL
tracingHeaders: EDGEQ_TRACING_HEADERS
{{- end -}}

{{/* secretKeyRef of one item of .Values.secrets; fails when the key is missing. */}}
{{- define "edgeq.secretKeyRef" -}}
{{- $item := index .root.Values.secrets .name -}}
{{- if not $item.key -}}
{{- fail (printf "secrets.%s.key must name the entry of Secret %s" .name $item.existingSecret) -}}
{{- end -}}
secretKeyRef:
  name: {{ $item.existingSecret | quote }}
  key: {{ $item.key | quote }}
{{- end -}}

{{/* Seconds in a Go duration ("20s", "1m30s", "500ms"), rounded up. */}}
{{- define "edgeq.seconds" -}}
{{- $d := toString . -}}
{{- if eq $d "0" -}}
0
{{- else -}}
{{- if not (regexMatch "^([0-9]*\\.?[0-9]+(ns|us|µs|ms|s|m|h))+$" $d) -}}
{{- fail (printf "config.server.shutdown_timeout %q is not a duration such as 20s or 1m30s" $d) -}}
{{- end -}}
{{- $units := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- $total := 0.0 -}}
{{- range $part := regexFindAll "[0-9]*\\.?[0-9]+(ns|us|µs|ms|s|m|h)" $d -1 -}}
{{- $number := regexFind "^[0-9]*\\.?[0-9]+" $part -}}
{{- $unit := trimPrefix $number $part -}}
{{- $total = addf $total (mulf (float64 $number) (index $units $unit)) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}
{{- end -}}

{{/* terminationGracePeriodSeconds: above the preStop pause, plus server.shutdown_timeout, plus 5 s for the
last attempt at pending compensations; by default that sum plus 10 s. */}}
{{- define "edgeq.terminationGracePeriodSeconds" -}}
{{- $shutdown := include "edgeq.seconds" (dig "server" "shutdown_timeout" "20s" (.Values.config | default dict)) | int -}}
{{- $preStop := .Values.drain.preStopSleepSeconds | default 0 | int -}}
{{- $needed := add $preStop $shutdown 5 -}}
{{- $grace := .Values.drain.terminationGracePeriodSeconds -}}
{{- if or (eq (toString $grace) "") (eq (toString $grace) "<nil>") -}}
{{- add $needed 10 -}}
{{- else if le (int $grace) $needed -}}
{{- fail (printf "drain.terminationGracePeriodSeconds %v is not above drain.preStopSleepSeconds (%d) + config.server.shutdown_timeout (%ds) + 5 s for pending compensations = %d: the kubelet would kill edgeq before it has drained" $grace $preStop $shutdown $needed) -}}
{{- else -}}
{{- int $grace -}}
{{- end -}}
{{- end -}}

{{/* The Redis keys of edgeq's configuration, from .Values.redis. */}}
{{- define "edgeq.redisConfig" -}}
{{- $r := .Values.redis -}}
{{- $sentinel := $r.sentinel.addrs | default list -}}
{{- $cluster := $r.cluster.addrs | default list -}}
{{- $wait := $r.waitReplicas | default 0 | int -}}
{{- if and $sentinel $cluster -}}
{{- fail "redis.sentinel.addrs and redis.cluster.addrs are both set: choose one" -}}
{{- end -}}
{{- $out := dict -}}
{{- if $r.trial.enabled -}}
{{- if or $sentinel $cluster -}}
{{- fail "redis.trial.enabled and redis.sentinel.addrs or redis.cluster.addrs are set: choose one Redis" -}}
{{- end -}}
{{- if gt $wait 0 -}}
{{- fail "redis.waitReplicas needs replicas, and the trial Redis is one server without any: every reservation would time out" -}}
{{- end -}}
{{- $_ := set $out "addr" (printf "%s:6379" (include "edgeq.redisName" .)) -}}
{{- else if $sentinel -}}
{{- if not $r.sentinel.masterName -}}
{{- fail "redis.sentinel.addrs is set but redis.sentinel.masterName is not: name the master the sentinels watch" -}}
{{- end -}}
{{- $_ := set $out "addrs" $sentinel -}}
{{- $_ := set $out "master_name" $r.sentinel.masterName -}}
{{- else if $cluster -}}
{{- $_ := set $out "addrs" $cluster -}}
{{- else if $r.addr -}}
{{- $_ := set $out "addr" $r.addr -}}
{{- else -}}
{{- fail "no Redis: set redis.addr, redis.sentinel (masterName and addrs) or redis.cluster.addrs, or redis.trial.enabled for a trial; the replicas must share one store" -}}
{{- end -}}
{{- if gt $wait 0 -}}
{{- $_ := set $out "wait_replicas" $wait -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* edgeq's configuration file: .Values.config with the keys the chart owns filled in, checked first. */}}
{{- define "edgeq.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- range $path := list "admin.api_key" "identity.secret" "redis.password" "turnstile.secret_key" "ledger.postgres_url" "tracing.headers" -}}
{{- $parts := splitList "." $path -}}
{{- $section := index $cfg (first $parts) | default dict -}}
{{- if index $section (last $parts) -}}
{{- fail (printf "config.%s is a secret: put it in a Secret and name it under secrets: instead" $path) -}}
{{- end -}}
{{- end -}}
{{- $owned := dict "redis.addr" "redis.addr, redis.sentinel, redis.cluster or redis.trial" "redis.addrs" "redis.sentinel.addrs or redis.cluster.addrs" "redis.master_name" "redis.sentinel.masterName" "redis.wait_replicas" "redis.waitReplicas" "tokens.signing_key_file" "secrets.signingKey" -}}
{{- range $path := keys $owned | sortAlpha -}}
{{- $parts := splitList "." $path -}}
{{- $section := index $cfg (first $parts) | default dict -}}
{{- if hasKey $section (last $parts) -}}
{{- fail (printf "config.%s is set by the chart: use the value %s instead" $path (index $owned $path)) -}}
{{- end -}}
{{- end -}}

{{- $server := index $cfg "server" | default dict -}}
{{- $listen := printf ":%s" (include "edgeq.httpPort" .) -}}
{{- if and (hasKey $server "listen") (ne (toString $server.listen) $listen) -}}
{{- fail (printf "config.server.listen must be %q (the container's public port) or left out" $listen) -}}
{{- end -}}
{{- $_ := set $server "listen" $listen -}}
{{- $_ := set $cfg "server" $server -}}

{{- $admin := index $cfg "admin" | default dict -}}
{{- $adminListen := printf ":%s" (include "edgeq.adminPort" .) -}}
{{- if and (hasKey $admin "listen") (ne (toString $admin.listen) $adminListen) -}}
{{- fail (printf "config.admin.listen must be %q (the container's admin port, on every interface for the probes) or left out" $adminListen) -}}
{{- end -}}
{{- $_ := set $admin "listen" $adminListen -}}
{{- $svc := include "edgeq.adminServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- $_ := set $admin "allowed_hosts" (concat ($admin.allowed_hosts | default list) $names | uniq) -}}
{{- $_ := set $cfg "admin" $admin -}}

{{- $redis := index $cfg "redis" | default dict -}}
{{- $cfg = set $cfg "redis" (merge $redis (include "edgeq.redisConfig" . | fromYaml)) -}}

{{- if not .Values.secrets.signingKey.existingSecret -}}
{{- fail "secrets.signingKey.existingSecret is empty: every replica must sign with the same key (edgeq keygen -out signing.pem; kubectl create secret generic edgeq-secrets --from-file=signing.pem=signing.pem)" -}}
{{- end -}}
{{- $tokens := index $cfg "tokens" | default dict -}}
{{- $_ := set $tokens "signing_key_file" (include "edgeq.signingKeyFile" .) -}}
{{- $_ := set $cfg "tokens" $tokens -}}
{{- toYaml $cfg -}}
{{- end -}}
