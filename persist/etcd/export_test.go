package etcd

// OpenWithDial is Open with gRPC dial options added, for tests that put an
// interceptor between the store and the cluster.
var OpenWithDial = open

// ParseEndpoints is parseEndpoints, for the tests.
var ParseEndpoints = parseEndpoints
