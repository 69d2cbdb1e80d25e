{{/* Names, labels and the operator's RBAC rules. */}}

{{- define "gpustack-k3.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpustack-k3.fullname" -}}
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

{{- define "gpustack-k3.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpustack-k3.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpustack-k3.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpustack-k3.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpustack-k3
{{- end -}}

{{- define "gpustack-k3.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpustack-k3.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpustack-k3.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Namespaces the operator watches: explicit list, else the release namespace with namespace-scoped RBAC,
     else none (= all namespaces). */}}
{{- define "gpustack-k3.watchNamespaces" -}}
{{- if .Values.operator.watchNamespaces -}}
{{- toJson .Values.operator.watchNamespaces -}}
{{- else if eq .Values.rbac.scope "namespace" -}}
{{- toJson (list .Release.Namespace) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* Exactly what `gpustack-k3 operator run` does (gpustack_k3/operator): no wildcards.
     - k3deployments: informer list/watch, get, patch (server-side apply of metadata);
       /status: get/patch/update (status writes); /finalizers: update (ownerReferences with
       blockOwnerDeletion need it where OwnerReferencesPermissionEnforcement is on).
     - the kinds it owns (api/v1alpha1/constants.py CHILD_KINDS): full lifecycle. The endpoint picker's Role
       grants reads of pods and inferencepools, which the operator holds itself (RBAC forbids granting more).
     - pods: read for readiness and cold start; pods/log: follow engine logs (operator/seams.py).
     - events: record phase changes. Leases (leader election) are in a Role of the release namespace. */}}
{{- define "gpustack-k3.rules" -}}
- apiGroups: ["k3.gpustack.ai"]
  resources: ["k3deployments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["k3.gpustack.ai"]
  resources: ["k3deployments/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["k3.gpustack.ai"]
  resources: ["k3deployments/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services", "configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["leaderworkerset.x-k8s.io"]
  resources: ["leaderworkersets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["disaggregatedset.x-k8s.io"]
  resources: ["disaggregatedsets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["resource.nvidia.com"]
  resources: ["computedomains"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["inference.networking.k8s.io"]
  resources: ["inferencepools"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}
