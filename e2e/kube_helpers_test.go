package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/testtool"
)

// kubeCluster is a real kube-apiserver (and its etcd) on 127.0.0.1, without
// controllers or kubelet: what Kubernetes service discovery talks to.
type kubeCluster struct {
	dir     string
	server  string // https://127.0.0.1:<port>
	caFile  string
	kubectl string
	// kubeconfig is the administrator's (group system:masters).
	kubeconfig string
}

// kubeTools returns the kube-apiserver, kubectl and etcd binaries `make e2e`
// builds and caches (scripts/e2e-tools.sh kubernetes etcd) and names in
// E2E_KUBERNETES_DIR and E2E_ETCD_DIR, or skips, saying so where make test
// shows it: a Kubernetes API server takes minutes to build.
func kubeTools(t *testing.T) (apiserver, kubectl, etcd string) {
	t.Helper()
	kdir, edir := os.Getenv("E2E_KUBERNETES_DIR"), os.Getenv("E2E_ETCD_DIR")
	if kdir == "" || edir == "" {
		testtool.Skip(t, "kube-apiserver, kubectl and etcd (E2E_KUBERNETES_DIR, E2E_ETCD_DIR)",
			"make e2e builds and caches them with scripts/e2e-tools.sh kubernetes etcd")
	}
	apiserver, kubectl, etcd = filepath.Join(kdir, "kube-apiserver"), filepath.Join(kdir, "kubectl"), filepath.Join(edir, "etcd")
	for _, b := range []string{apiserver, kubectl, etcd} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("E2E_KUBERNETES_DIR/E2E_ETCD_DIR: %v", err)
		}
	}
	return apiserver, kubectl, etcd
}

// Static tokens of the API server's --token-auth-file.
const (
	adminToken = "e2e-admin-token"
	// saToken authenticates as a ServiceAccount of the chart (the user name
	// and groups the API server gives a ServiceAccount token), so that
	// vllm_prober runs with exactly the chart's RBAC.
	saToken = "e2e-serviceaccount-token"
)

// startKube starts etcd and kube-apiserver. saUser is the ServiceAccount
// ("system:serviceaccount:<ns>:<name>") saToken authenticates as.
func startKube(t *testing.T, saNamespace, saName string) *kubeCluster {
	t.Helper()
	apiserverBin, kubectl, etcdBin := kubeTools(t)
	dir := t.TempDir()
	k := &kubeCluster{dir: dir, kubectl: kubectl}

	etcdClient, etcdPeer := freeAddr(t), freeAddr(t)
	startProcess(t, "etcd", etcdBin,
		"--name=e2e", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls=http://"+etcdClient, "--advertise-client-urls=http://"+etcdClient,
		"--listen-peer-urls=http://"+etcdPeer, "--initial-advertise-peer-urls=http://"+etcdPeer,
		"--initial-cluster=e2e=http://"+etcdPeer, "--log-level=warn")

	k.caFile = filepath.Join(dir, "ca.crt")
	writeServingCerts(t, dir)
	writeRSAKey(t, filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub"))
	tokens := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n%s,system:serviceaccount:%s:%s,sa-uid,\"system:serviceaccounts,system:serviceaccounts:%s,system:authenticated\"\n",
		adminToken, saToken, saNamespace, saName, saNamespace)
	writeFile(t, filepath.Join(dir, "tokens.csv"), tokens)

	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	k.server = "https://" + addr
	startProcess(t, "kube-apiserver", apiserverBin,
		"--etcd-servers=http://"+etcdClient,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+port,
		"--tls-cert-file="+filepath.Join(dir, "server.crt"), "--tls-private-key-file="+filepath.Join(dir, "server.key"),
		"--client-ca-file="+k.caFile, "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount", "--cert-dir="+filepath.Join(dir, "certs"))

	k.kubeconfig = k.writeKubeconfig(t, "admin.kubeconfig", adminToken)
	ctx := t.Context()
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(k.caFile)
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	err := waitFor(ctx, 90*time.Second, 200*time.Millisecond, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("status %d", resp.StatusCode)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 30*time.Second, 200*time.Millisecond, "the default namespace", func(ctx context.Context) (bool, error) {
		_, err := k.run(ctx, "", "get", "namespace", "default")
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	return k
}

// writeKubeconfig writes a kubeconfig for token and returns its path.
func (k *kubeCluster) writeKubeconfig(t *testing.T, name, token string) string {
	t.Helper()
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []any{map[string]any{"name": "e2e", "cluster": map[string]any{"server": k.server, "certificate-authority": k.caFile}}},
		"users":           []any{map[string]any{"name": "u", "user": map[string]any{"token": token}}},
		"contexts":        []any{map[string]any{"name": "e2e", "context": map[string]any{"cluster": "e2e", "user": "u"}}},
		"current-context": "e2e",
	}
	b, err := json.Marshal(cfg) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(k.dir, name)
	writeFile(t, p, string(b))
	return p
}

// run runs kubectl as the administrator with stdin, and returns its output.
func (k *kubeCluster) run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.kubectl, append([]string{"--kubeconfig=" + k.kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// kubectl runs kubectl and fails the test on error.
func (k *kubeCluster) kubectlT(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := k.run(t.Context(), stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeServingCerts writes ca.crt and the API server's server.crt and
// server.key (for 127.0.0.1 and localhost) into dir.
func writeServingCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caTmpl, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ca.crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, filepath.Join(dir, "server.crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})))
	writeFile(t, filepath.Join(dir, "server.key"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
}

// writeRSAKey writes the ServiceAccount token signing key pair.
func writeRSAKey(t *testing.T, keyPath, pubPath string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))
	writeFile(t, pubPath, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
}
