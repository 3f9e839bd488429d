// Package deploy holds no code: it is where leaf's deployment files live,
// the systemd unit (leaf.service) and the Kubernetes manifests
// (kubernetes/), and its tests check them: the unit with
// systemd-analyze, the manifests by parsing them against leaf's own
// configuration and HTTP endpoints. The container image's Containerfile
// is at the module's root (make image).
package deploy
