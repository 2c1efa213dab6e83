// Package deploy holds rgit's deployment files: rgit.yaml (the git nodes'
// StatefulSet, headless peer Service, client LoadBalancer, internal
// Service, PodDisruptionBudget, NetworkPolicy), api.yaml (the read-API
// tier), secrets.yaml and grafana-dashboard.json. It contains no Go code;
// its tests decode every manifest strictly into the Kubernetes API types,
// check them against the server's configuration and endpoints, and check
// that the dashboard queries only metrics a node exports.
package deploy
