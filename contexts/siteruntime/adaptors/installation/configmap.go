package installation

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// ConfigMap data keys of the record.
const (
	KeyInstallationID = "installation_id"
	KeyEnvironment    = "environment"
	KeyAuthority      = "authority"
	KeyInstalledAt    = "installed_at"
	KeyJournals       = "journals"
)

// ConfigMap is the record as a ConfigMap in the Runtime's namespace,
// labelled app.kubernetes.io/component=metallo-runtime-installation. The
// Runtime's service account needs get and create on configmaps there.
type ConfigMap struct {
	client    kubernetes.Interface
	namespace string
	name      string
}

// NewConfigMap returns the record namespace/name read and written with
// client.
func NewConfigMap(client kubernetes.Interface, namespace, name string) *ConfigMap {
	return &ConfigMap{client: client, namespace: namespace, name: name}
}

// Describe names the record.
func (c *ConfigMap) Describe() string {
	return "installation record configmap " + c.namespace + "/" + c.name
}

// Read returns the record, nil when the ConfigMap does not exist.
func (c *ConfigMap) Read(ctx context.Context) (*domain.Installation, error) {
	cm, err := c.client.CoreV1().ConfigMaps(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec, err := FromConfigMap(cm)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// Create creates the ConfigMap; an existing one is kept
// (application.ErrRecordExists).
func (c *ConfigMap) Create(ctx context.Context, rec domain.Installation) error {
	_, err := c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, ToConfigMap(c.namespace, c.name, rec), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return application.ErrRecordExists
	}
	return err
}

// ToConfigMap renders rec as the ConfigMap namespace/name. It is immutable:
// the record is written once.
func ToConfigMap(namespace, name string, rec domain.Installation) *corev1.ConfigMap {
	immutable := true
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels: map[string]string{"app.kubernetes.io/component": "metallo-runtime-installation", "app.kubernetes.io/part-of": "metallo"},
		},
		Immutable: &immutable,
		Data: map[string]string{
			KeyInstallationID: rec.InstallationID,
			KeyEnvironment:    rec.Environment,
			KeyAuthority:      rec.Authority,
			KeyInstalledAt:    rec.InstalledAt.UTC().Format(time.RFC3339),
			KeyJournals:       strings.Join(rec.Journals, ","),
		},
	}
}

// FromConfigMap reads a record, failing when a key is missing or the time
// is malformed.
func FromConfigMap(cm *corev1.ConfigMap) (domain.Installation, error) {
	where := fmt.Sprintf("configmap %s/%s", cm.Namespace, cm.Name)
	for _, k := range []string{KeyInstallationID, KeyEnvironment, KeyAuthority, KeyInstalledAt, KeyJournals} {
		if cm.Data[k] == "" {
			return domain.Installation{}, fmt.Errorf("%s is not an installation record: data.%s is missing", where, k)
		}
	}
	at, err := time.Parse(time.RFC3339, cm.Data[KeyInstalledAt])
	if err != nil {
		return domain.Installation{}, fmt.Errorf("%s: data.%s: %w", where, KeyInstalledAt, err)
	}
	return domain.Installation{
		InstallationID: cm.Data[KeyInstallationID], Environment: cm.Data[KeyEnvironment], Authority: cm.Data[KeyAuthority],
		InstalledAt: at.UTC(), Journals: strings.Split(cm.Data[KeyJournals], ","),
	}, nil
}

var _ application.InstallationRecord = (*ConfigMap)(nil)
