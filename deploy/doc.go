// Package deploy holds rgit's deployment manifests (rgit.yaml: StatefulSet,
// headless peer Service, client Service). It contains no Go code.
package deploy
