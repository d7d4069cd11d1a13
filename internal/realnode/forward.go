package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vishvananda/netlink"
)

// Pods reach the API server as in-cluster clients do: at the `kubernetes`
// Service's ClusterIP and port (KUBERNETES_SERVICE_HOST/PORT). The local
// cluster has no kube-proxy (its rules need iptables), so each node puts
// the Service's address on its bridge and forwards what arrives there to
// the API server, whose certificate names that address. The listener is
// bound to the bridge (SO_BINDTODEVICE): nodes of several clusters on one
// machine each answer their own pods at the same address.

// forwarder relays TCP connections from a listener to a target address.
type forwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			relay(conn, f.target)
		}()
	}
}

// relay copies both ways between conn and a new connection to target
// until either side closes.
func relay(conn net.Conn, target string) {
	defer conn.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, conn); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(conn, up); conn.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

// close stops accepting; connections under way end with their peers.
func (f *forwarder) close() error {
	err := f.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// forward listens on addr (bound to device when not empty) and relays to
// target until the node stops.
func (n *Node) forward(addr, device, target string) error {
	lc := net.ListenConfig{}
	if device != "" {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = syscall.BindToDevice(int(fd), device) }); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := lc.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		return fmt.Errorf("node %s: listen on %s for %s: %w", n.Name, addr, target, err)
	}
	f := &forwarder{ln: ln, target: target}
	f.wg.Add(1)
	go f.serve()
	n.mu.Lock()
	n.forwards = append(n.forwards, f)
	n.mu.Unlock()
	return nil
}

// Forward makes target (a host:port on this machine, e.g. a loopback
// registry) reachable from the node's pods at the node's IP and port.
func (n *Node) Forward(port int, target string) error {
	return n.forward(net.JoinHostPort(n.IP, strconv.Itoa(port)), "", target)
}

// serveAPIService answers the `kubernetes` Service's address on the
// node's bridge with the API server of the node's kubeconfig.
func (n *Node) serveAPIService(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig %s: %w", n.opts.Kubeconfig, err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("API server address %q in %s: %w", cfg.Host, n.opts.Kubeconfig, err)
	}
	svc, err := n.opts.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the API server's Service default/kubernetes: %w", err)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" {
		return fmt.Errorf("the API server's Service default/kubernetes has no ClusterIP or port: %+v", svc.Spec)
	}
	link, err := netlink.LinkByName(n.Bridge())
	if err != nil {
		return fmt.Errorf("node %s: bridge %s: %w", n.Name, n.Bridge(), err)
	}
	addr, err := netlink.ParseAddr(svc.Spec.ClusterIP + "/32")
	if err != nil {
		return fmt.Errorf("the API server's Service address %q: %w", svc.Spec.ClusterIP, err)
	}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("node %s: add the API server's Service address %s to %s: %w", n.Name, addr, n.Bridge(), err)
	}
	listen := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	return n.forward(listen, n.Bridge(), u.Host)
}

// stopForwards closes the node's listeners.
func (n *Node) stopForwards() error {
	n.mu.Lock()
	fs := n.forwards
	n.forwards = nil
	n.mu.Unlock()
	var errs []error
	for _, f := range fs {
		errs = append(errs, f.close())
	}
	return errors.Join(errs...)
}
