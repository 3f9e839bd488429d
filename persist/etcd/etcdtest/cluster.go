package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Script is the path of scripts/etcd.sh.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "etcd.sh")
}

// StartCluster starts a three-member cluster for t alone with
// scripts/etcd.sh, env added to the script's environment, and stops it at
// cleanup. It returns the script's directory of the cluster (for the
// script's commands on one member) and the endpoints. The data is on a
// memory file system when there is one (/dev/shm), as in make test.
// Without etcd (and not root, to install it) the test is skipped, or
// failed when CI=true.
func StartCluster(t testing.TB, env ...string) (dir, endpoints string) {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil && os.Getuid() != 0 {
		const why = "etcd not found: install etcd-server (make test does, as root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	dir, err := os.MkdirTemp("/dev/shm", "leaf-etcd-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", Script(), "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("etcd.sh stop: %v\n%s", err, out)
		}
	})
	cmd := exec.Command("bash", Script(), "start", dir)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("etcd.sh start: %v\n%s", err, stderr.String())
	}
	endpoints, ok := strings.CutPrefix(strings.TrimSpace(string(out)), EnvEndpoints+"=")
	if !ok {
		t.Fatalf("etcd.sh start printed %q", out)
	}
	return dir, endpoints
}

// TLSFiles writes a throwaway CA, and signed by it a certificate for
// 127.0.0.1 to serve and one for a client, as the PEM files that
// scripts/etcd.sh wants in LEAF_ETCD_TLS_DIR: ca.pem, server.pem,
// server-key.pem, client.pem and client-key.pem.
func TLSFiles(t testing.TB, dir string) {
	t.Helper()
	caKey, caDER := certificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "leaf test CA"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	for _, c := range []struct {
		name  string
		usage x509.ExtKeyUsage
	}{{"server", x509.ExtKeyUsageServerAuth}, {"client", x509.ExtKeyUsageClientAuth}} {
		key, der := certificate(t, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "leaf test " + c.name},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{c.usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}, ca, caKey)
		writePEM(t, filepath.Join(dir, c.name+".pem"), "CERTIFICATE", der)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, filepath.Join(dir, c.name+"-key.pem"), "PRIVATE KEY", keyDER)
	}
}

// certificate makes a key and a certificate of tmpl for it, signed by
// parent's key (self-signed when parent is nil), valid for a day.
func certificate(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.BasicConstraintsValid = true
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
