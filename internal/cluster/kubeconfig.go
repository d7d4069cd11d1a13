package cluster

import (
	"crypto/tls"
	"net/http"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ContextName is the kubeconfig context Start writes.
const ContextName = "gpuslice-local"

// SchedulerUser is the user kube-scheduler authenticates as: the name
// kubeadm gives it (the CN of its client certificate) and the one the
// bootstrap RBAC binds the system:kube-scheduler role to.
const SchedulerUser = "system:kube-scheduler"

// writeKubeconfig writes a kubeconfig whose one context authenticates to
// host as user with a bearer token.
func writeKubeconfig(path, host string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ContextName] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[ContextName] = &clientcmdapi.Context{Cluster: ContextName, AuthInfo: user}
	cfg.CurrentContext = ContextName
	return clientcmd.WriteToFile(*cfg, path)
}

// insecureLoopbackClient polls health endpoints of components whose serving
// certificates are self-signed at start-up; it is only used on 127.0.0.1.
func insecureLoopbackClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health checks only
		},
	}
}
