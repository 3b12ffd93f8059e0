module gvirtus-k8s/tests/helm/objdiff

go 1.24

require sigs.k8s.io/yaml v1.6.0

require go.yaml.in/yaml/v2 v2.4.2 // indirect
