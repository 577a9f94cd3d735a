package inference

import (
	"fmt"
	"strings"

	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// InferenceServiceObservation is the state of an inference service's
// InferenceService isvc, with the observation of the predictor Deployment
// KServe's controller made for it (nil while there is none), as observe
// reports it (docs/site-runtime.md#inference-services-on-kserve):
//
//   - healthy when KServe reports the InferenceService Ready;
//   - failed when KServe reports the model failed: transition status
//     BlockedByFailedLoad or InvalidSpec, or model state FailedToLoad; the
//     reason is lastFailureInfo's (ModelLoadFailed, …; else the transition
//     status or model state), its message the failure's, exit_code its
//     exitCode, finished_at its time;
//   - failed, reason ModelLoadFailed, when a predictor Pod's
//     kserve-container has exited in error — terminated with reason Error,
//     or waiting in CrashLoopBackOff after such an exit — with that
//     termination's exit code, message and time: the rule KServe's
//     controller applies to the first predictor Pod (PropagateModelStatus
//     in KServe v0.16.0), read here from every Pod of the predictor's UID
//     lineage at observe time, since KServe's controller reconciles again
//     only when the predictor Deployment changes (its progress deadline,
//     600 s later);
//   - otherwise as the predictor Deployment is (DeploymentObservation, the
//     application family's rules): queued while its Pods wait for quota or
//     a node — KServe then reports PredictorReady False
//     (MinimumReplicasUnavailable), which alone does not tell a wait from a
//     failure — failed for a permanent Pod refusal or a passed progress
//     deadline, running while a Pod runs, and running (not yet healthy)
//     while the Deployment is Available but KServe has not reported Ready;
//   - queued while KServe's controller has made no predictor Deployment
//     yet, quoting the InferenceService's first false condition.
func InferenceServiceObservation(isvc *kservev1beta1.InferenceService, predictor *application.Observation, pods []corev1.Pod) application.Observation {
	if isvc.Status.IsReady() {
		return application.Observation{State: siteprotocol.StateHealthy, Message: fmt.Sprintf("InferenceService %s is Ready", isvc.Name)}
	}
	ms := isvc.Status.ModelStatus
	active, target := kservev1beta1.ModelState(""), kservev1beta1.ModelState("")
	if s := ms.ModelRevisionStates; s != nil {
		active, target = s.ActiveModelState, s.TargetModelState
	}
	if ms.TransitionStatus == kservev1beta1.BlockedByFailedLoad || ms.TransitionStatus == kservev1beta1.InvalidSpec ||
		active == kservev1beta1.FailedToLoad || target == kservev1beta1.FailedToLoad {
		obs := application.Observation{State: siteprotocol.StateFailed, Reason: string(ms.TransitionStatus),
			Message: fmt.Sprintf("KServe reports the model of InferenceService %s %s (transition %s)", isvc.Name, kservev1beta1.FailedToLoad, ms.TransitionStatus)}
		if obs.Reason == "" {
			obs.Reason = string(kservev1beta1.FailedToLoad)
		}
		if f := ms.LastFailureInfo; f != nil {
			if f.Reason != "" {
				obs.Reason = string(f.Reason)
			}
			if f.Message != "" {
				obs.Message = f.Message
			}
			code := f.ExitCode
			obs.ExitCode = &code
			obs.FinishedAt = kube.Timestamp(f.Time)
		}
		return obs
	}
	if obs, failed := predictorLoadFailure(isvc.Name, pods); failed {
		return obs
	}
	if predictor != nil {
		obs := *predictor
		if obs.State == siteprotocol.StateHealthy {
			obs = application.Observation{State: siteprotocol.StateRunning,
				Message: fmt.Sprintf("the predictor Deployment of InferenceService %s is Available; KServe has not reported it Ready yet", isvc.Name)}
		}
		return obs
	}
	obs := application.Observation{State: siteprotocol.StateQueued, Message: fmt.Sprintf("KServe's controller has not created the predictor of InferenceService %s yet", isvc.Name)}
	for _, c := range isvc.Status.Conditions {
		if c.Status == corev1.ConditionFalse {
			obs.Reason, obs.Message = c.Reason, fmt.Sprintf("%s: %s", c.Type, c.Message)
			break
		}
	}
	return obs
}

// predictorLoadFailure finds, in pods (the predictor's, by UID lineage), a
// kserve-container that exited in error as KServe's controller tells one
// (terminated with reason Error, or in CrashLoopBackOff after a
// termination), and answers failed / ModelLoadFailed with its exit code,
// message and time; false when none has.
func predictorLoadFailure(isvc string, pods []corev1.Pod) (application.Observation, bool) {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != PredictorContainer {
				continue
			}
			t := cs.State.Terminated
			if t != nil && t.Reason != containerReasonError {
				t = nil
			}
			if w := cs.State.Waiting; t == nil && w != nil && w.Reason == containerReasonCrashLoopBackOff {
				t = cs.LastTerminationState.Terminated
			}
			if t == nil {
				continue
			}
			code := t.ExitCode
			msg := fmt.Sprintf("the model server of InferenceService %s exited with status %d before serving (container %s of Pod %s, %d restarts)",
				isvc, code, cs.Name, p.Name, cs.RestartCount)
			if m := strings.TrimSpace(t.Message); m != "" {
				msg += ": " + m
			}
			return application.Observation{State: siteprotocol.StateFailed, Reason: string(kservev1beta1.ModelLoadFailed), Message: msg,
				ExitCode: &code, FinishedAt: kube.Timestamp(&t.FinishedAt)}, true
		}
	}
	return application.Observation{}, false
}

// The kubelet's container state reasons KServe's controller reads
// (constants.StateReasonError, constants.StateReasonCrashLoopBackOff).
const (
	containerReasonError            = "Error"
	containerReasonCrashLoopBackOff = "CrashLoopBackOff"
)
