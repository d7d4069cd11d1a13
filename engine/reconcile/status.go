package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// The status ConfigMap's keys.
const (
	KeySource              = "source"
	KeyRevision            = "revision"
	KeyLastAppliedRevision = "lastAppliedRevision"
	KeyInSync              = "inSync"
	KeyLastError           = "lastError"
	KeyLastRound           = "lastRound"
	KeyTime                = "time"
)

// Event reasons, on the status ConfigMap.
const (
	ReasonApplied = "Applied"
	ReasonInSync  = "InSync"
	ReasonFailed  = "ReconcileFailed"
	ReasonLocked  = "Locked"
)

// StatusName is the status ConfigMap of stack, in the inventory
// namespace.
func StatusName(stack string) string { return "gpuslice-reconcile-" + stack }

const fieldManager = "gpuslice-reconcile"

// Status writes each round to the stack's status ConfigMap and records
// Events on it, for `kubectl get configmap`/`kubectl events` readers.
type Status struct {
	client      kubernetes.Interface
	namespace   string
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// last is the previous round's status per stack: lastAppliedRevision
	// carries over failed rounds, and an unchanged in-sync round records
	// no Event.
	last map[string]map[string]string
}

// NewStatus reports into namespace; Close flushes its Events.
func NewStatus(client kubernetes.Interface, namespace string) *Status {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &Status{client: client, namespace: namespace, broadcaster: b, last: map[string]map[string]string{},
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fieldManager})}
}

// Close stops recording Events.
func (s *Status) Close() { s.broadcaster.Shutdown() }

// Record writes res to the stack's status ConfigMap and records an Event.
func (s *Status) Record(ctx context.Context, source string, res Result) error {
	prev, err := s.previous(ctx, res.Stack)
	if err != nil {
		return err
	}
	data := map[string]string{
		KeySource: source, KeyRevision: res.Revision.ID, KeyTime: res.At.UTC().Format(time.RFC3339),
		KeyLastAppliedRevision: prev[KeyLastAppliedRevision], KeyInSync: strconv.FormatBool(res.InSync), KeyLastRound: outcome(res),
	}
	if res.InSync {
		data[KeyLastAppliedRevision] = res.Revision.ID
	}
	if res.Err != nil {
		data[KeyLastError] = res.Err.Error()
	}
	if res.Locked != nil {
		// A skipped round says nothing about the cluster: keep what the
		// last round that ran found.
		data[KeyInSync], data[KeyLastError] = prev[KeyInSync], prev[KeyLastError]
	}
	cm := corev1ac.ConfigMap(StatusName(res.Stack), s.namespace).
		// Not app.kubernetes.io/managed-by=gpuslice: that marks a stack's
		// objects, which the engine plans and prunes.
		WithLabels(map[string]string{"app.kubernetes.io/name": "gpuslice-reconcile", "app.kubernetes.io/component": "status"}).
		WithData(data)
	obj, err := s.client.CoreV1().ConfigMaps(s.namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("write the reconcile status of stack %s (ConfigMap %s/%s): %w", res.Stack, s.namespace, StatusName(res.Stack), err)
	}
	s.last[res.Stack] = data
	s.event(obj, res, prev)
	return nil
}

// previous is the last status written: this process's, else the
// ConfigMap a previous one left.
func (s *Status) previous(ctx context.Context, stack string) (map[string]string, error) {
	if d, ok := s.last[stack]; ok {
		return d, nil
	}
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, StatusName(stack), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the reconcile status of stack %s (ConfigMap %s/%s): %w", stack, s.namespace, StatusName(stack), err)
	}
	return cm.Data, nil
}

// maxEventMessage keeps an Event within what the API server takes; the
// whole error is in the ConfigMap's lastError.
const (
	maxEventMessage = 1024
	seeStatus       = "… (the whole error: the status ConfigMap's lastError)"
)

func (s *Status) event(obj *corev1.ConfigMap, res Result, prev map[string]string) {
	switch {
	case res.Err != nil:
		msg := res.Err.Error()
		if len(msg) > maxEventMessage {
			msg = strings.ToValidUTF8(msg[:maxEventMessage-len(seeStatus)], "") + seeStatus
		}
		s.recorder.Eventf(obj, corev1.EventTypeWarning, ReasonFailed, "%s", msg)
	case res.Locked != nil:
		h := res.Locked.Holder
		s.recorder.Eventf(obj, corev1.EventTypeNormal, ReasonLocked, "round skipped: stack %s is locked by %s (%s)", res.Stack, h.Who, h.Operation)
	case res.Applied != nil:
		s.recorder.Eventf(obj, corev1.EventTypeNormal, ReasonApplied, "applied %s: %s", revName(res.Revision), counts(res.Applied))
	case prev[KeyInSync] != "true" || prev[KeyLastAppliedRevision] != res.Revision.ID:
		s.recorder.Eventf(obj, corev1.EventTypeNormal, ReasonInSync, "in sync at %s", revName(res.Revision))
	}
}

func outcome(res Result) string {
	switch {
	case res.Err != nil:
		return "failed"
	case res.Locked != nil:
		return "skipped: locked by " + res.Locked.Holder.Who
	case res.Applied != nil:
		return "applied: " + counts(res.Applied)
	}
	return "in sync"
}
