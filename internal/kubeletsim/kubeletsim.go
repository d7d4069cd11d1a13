// Package kubeletsim plays the kubelet's part against a node plugin where
// no kubelet runs (the node plugin's own tests; real nodes have a kubelet): it dials the
// plugin's DRA socket and asks it to prepare and unprepare claims with the
// kubelet's own gRPC API (k8s.io/kubelet/pkg/apis/dra/v1).
package kubeletsim

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourcev1 "k8s.io/api/resource/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// Client talks to one plugin's DRA socket.
type Client struct {
	conn *grpc.ClientConn
	dra  drapb.DRAPluginClient
}

// Dial connects to the plugin socket at path (e.g. <plugin dir>/dra.sock).
func Dial(path string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial the node plugin at %s: %w", path, err)
	}
	return &Client{conn: conn, dra: drapb.NewDRAPluginClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func claimRefs(claims []*resourcev1.ResourceClaim) []*drapb.Claim {
	var out []*drapb.Claim
	for _, cl := range claims {
		out = append(out, &drapb.Claim{Namespace: cl.Namespace, Name: cl.Name, Uid: string(cl.UID)})
	}
	return out
}

// Prepare calls NodePrepareResources for claims and returns each claim's
// CDI device IDs by claim UID; a claim the plugin failed is an error.
func (c *Client) Prepare(ctx context.Context, claims ...*resourcev1.ResourceClaim) (map[string][]string, error) {
	devices, err := c.PrepareDevices(ctx, claims...)
	out := map[string][]string{}
	for uid, ds := range devices {
		for _, d := range ds {
			out[uid] = append(out[uid], d.CdiDeviceIds...)
		}
	}
	return out, err
}

// PrepareDevices calls NodePrepareResources for claims and returns each
// claim's devices as the plugin answered (request names, pool, device, CDI
// device IDs) by claim UID; a claim the plugin failed is an error.
func (c *Client) PrepareDevices(ctx context.Context, claims ...*resourcev1.ResourceClaim) (map[string][]*drapb.Device, error) {
	resp, err := c.dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: claimRefs(claims)})
	if err != nil {
		return nil, fmt.Errorf("NodePrepareResources: %w", err)
	}
	out := map[string][]*drapb.Device{}
	var errs []error
	for _, cl := range claims {
		r, ok := resp.Claims[string(cl.UID)]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("claim %s/%s: no answer", cl.Namespace, cl.Name))
		case r.Error != "":
			errs = append(errs, fmt.Errorf("claim %s/%s: %s", cl.Namespace, cl.Name, r.Error))
		default:
			out[string(cl.UID)] = r.Devices
		}
	}
	return out, errors.Join(errs...)
}

// Unprepare calls NodeUnprepareResources for claims.
func (c *Client) Unprepare(ctx context.Context, claims ...*resourcev1.ResourceClaim) error {
	resp, err := c.dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claimRefs(claims)})
	if err != nil {
		return fmt.Errorf("NodeUnprepareResources: %w", err)
	}
	var errs []error
	for _, cl := range claims {
		if r, ok := resp.Claims[string(cl.UID)]; !ok {
			errs = append(errs, fmt.Errorf("claim %s/%s: no answer", cl.Namespace, cl.Name))
		} else if r.Error != "" {
			errs = append(errs, fmt.Errorf("claim %s/%s: %s", cl.Namespace, cl.Name, r.Error))
		}
	}
	return errors.Join(errs...)
}
