// Command kserve-controller is the local cluster's KServe: KServe v0.16.0's own InferenceService
// reconciler (pkg/controller/v1beta1/inferenceservice) and its InferenceService admission webhooks
// (the defaulter and the validator of pkg/apis/serving/v1beta1), run with controller-runtime as
// KServe's cmd/manager wires them, and nothing else of KServe's manager: no TrainedModel,
// InferenceGraph or LocalModelCache controllers, no Pod mutator, no ServingRuntime validators.
//
// It is in its own module because KServe's go.mod carries a replace line (controller-runtime
// v0.19.7) and an exclude that a dependent module must repeat; k8s.io/* are pinned to the control
// plane's v0.33.4. deploy/localcluster/cluster.sh builds it into the local cluster's cache and
// `localcluster up` starts it as KServe's service account (see ../README.md).
//
// The webhook server listens on --webhook-host:--webhook-port with tls.crt and tls.key from
// --cert-dir (cluster-up signs them with the cluster CA); the health probe answers /readyz once
// the webhook server serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	otelv1beta1 "github.com/open-telemetry/opentelemetry-operator/apis/v1beta1"
	istioclientv1beta1 "istio.io/client-go/pkg/apis/networking/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	knservingv1 "knative.dev/serving/pkg/apis/serving/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kserve/kserve/pkg/apis/serving/v1alpha1"
	"github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	"github.com/kserve/kserve/pkg/constants"
	v1beta1controller "github.com/kserve/kserve/pkg/controller/v1beta1/inferenceservice"
	"github.com/kserve/kserve/pkg/utils"
)

type options struct {
	webhookHost, certDir, probeAddr, metricsAddr string
	webhookPort                                  int
	zap                                          zap.Options
}

func main() {
	// The kubeconfig flag is controller-runtime's own (registered on flag.CommandLine by
	// sigs.k8s.io/controller-runtime/pkg/client/config): KServe's defaulter reads the
	// configuration through config.GetConfig() on every request, so it must be that flag.
	var o options
	flag.StringVar(&o.webhookHost, "webhook-host", "127.0.0.1", "address the webhook server listens on")
	flag.IntVar(&o.webhookPort, "webhook-port", 9443, "port the webhook server listens on")
	flag.StringVar(&o.certDir, "cert-dir", "", "directory holding the webhook's serving certificate (tls.crt, tls.key)")
	flag.StringVar(&o.probeAddr, "health-probe-addr", "127.0.0.1:8081", "address of /healthz and /readyz")
	flag.StringVar(&o.metricsAddr, "metrics-addr", "0", `address of /metrics ("0": none)`)
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		fmt.Fprintf(os.Stderr, "kserve-controller: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.certDir == "" {
		return errors.New("--cert-dir is required")
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	clientSet, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	mgr, err := manager.New(cfg, manager.Options{
		Metrics: metricsserver.Options{BindAddress: o.metricsAddr},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: o.webhookHost, Port: o.webhookPort, CertDir: o.certDir,
		}),
		HealthProbeBindAddress: o.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	scheme := mgr.GetScheme()
	for name, add := range map[string]func(*runtime.Scheme) error{
		"KServe v1alpha1": v1alpha1.AddToScheme, "KServe v1beta1": v1beta1.AddToScheme,
		"Gateway API": gwapiv1.Install, "core": corev1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("scheme %s: %w", name, err)
		}
	}
	// KServe's manager registers the optional APIs only when their CRDs exist; the local cluster
	// has none of them, so the reconciler runs in Standard (raw) mode without them.
	if err := addOptionalSchemes(cfg, scheme); err != nil {
		return err
	}

	isvcConfigMap, err := v1beta1.GetInferenceServiceConfigMap(ctx, clientSet)
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: %w", constants.KServeNamespace, constants.InferenceServiceConfigMapName, err)
	}
	deployConfig, err := v1beta1.NewDeployConfig(isvcConfigMap)
	if err != nil {
		return fmt.Errorf("deploy config: %w", err)
	}
	ingressConfig, err := v1beta1.NewIngressConfig(isvcConfigMap)
	if err != nil {
		return fmt.Errorf("ingress config: %w", err)
	}
	// As KServe's manager does: this also sets the list of GPU resource types.
	if _, err := v1beta1.NewMultiNodeConfig(isvcConfigMap); err != nil {
		return fmt.Errorf("multi-node config: %w", err)
	}

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clientSet.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	if err := (&v1beta1controller.InferenceServiceReconciler{
		Client:    mgr.GetClient(),
		Clientset: clientSet,
		Log:       ctrl.Log.WithName("v1beta1Controllers").WithName("InferenceService"),
		Scheme:    scheme,
		Recorder:  broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "v1beta1Controllers"}),
	}).SetupWithManager(mgr, deployConfig, ingressConfig); err != nil {
		return fmt.Errorf("InferenceService controller: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr).
		For(&v1beta1.InferenceService{}).
		WithDefaulter(&v1beta1.InferenceServiceDefaulter{}).
		WithValidator(&v1beta1.InferenceServiceValidator{}).
		Complete(); err != nil {
		return fmt.Errorf("InferenceService webhooks: %w", err)
	}
	started := func(req *http.Request) error { return mgr.GetWebhookServer().StartedChecker()(req) }
	if err := mgr.AddHealthzCheck("healthz", started); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", started); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting", "webhook", fmt.Sprintf("%s:%d", o.webhookHost, o.webhookPort),
		"deployMode", deployConfig.DefaultDeploymentMode)
	return mgr.Start(ctx)
}

// addOptionalSchemes adds Knative Serving, Istio, KEDA and OpenTelemetry to the scheme when their
// CRDs are installed, as KServe's manager does.
func addOptionalSchemes(cfg *rest.Config, scheme *runtime.Scheme) error {
	for _, o := range []struct {
		groupVersion, kind string
		add                func(*runtime.Scheme) error
	}{
		{knservingv1.SchemeGroupVersion.String(), constants.KnativeServiceKind, knservingv1.AddToScheme},
		{istioclientv1beta1.SchemeGroupVersion.String(), constants.IstioVirtualServiceKind, istioclientv1beta1.AddToScheme},
		{kedav1alpha1.SchemeGroupVersion.String(), constants.KedaScaledObjectKind, kedav1alpha1.AddToScheme},
		{otelv1beta1.GroupVersion.String(), constants.OpenTelemetryCollector, otelv1beta1.AddToScheme},
	} {
		found, err := utils.IsCrdAvailable(cfg, o.groupVersion, o.kind)
		if err != nil {
			return fmt.Errorf("is %s %s available: %w", o.groupVersion, o.kind, err)
		}
		if found {
			if err := o.add(scheme); err != nil {
				return fmt.Errorf("scheme %s: %w", o.groupVersion, err)
			}
		}
	}
	return nil
}
