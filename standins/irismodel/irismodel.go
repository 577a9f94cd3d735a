// Package irismodel is a member's trained model, for the tests and make
// demo: scikit-learn's iris classifier (a logistic regression on the
// bundled iris data set, 4 features, classes 0, 1 and 2), saved with
// joblib by deploy/images/sklearnserver/train_iris.py in the sklearnserver
// image's Debian root file system (so the image's scikit-learn loads it;
// deploy/images/README.md says how to make it again). The member's
// repository holds it as an LFS object at Path; the local cluster's
// ClusterServingRuntime metallo-sklearnserver serves it from the checked-out
// workspace (docs/site-runtime.md#inference-services-on-kserve).
//
// Loading a joblib file runs code from the file (it is a pickle): that is
// the member's own predictor, run as the member in the member's Pod.
package irismodel

import (
	_ "embed"
	"slices"
)

//go:embed model.joblib
var model []byte

// Model returns the joblib file's bytes (a copy).
func Model() []byte { return slices.Clone(model) }

// Format is the KServe model format of the model.
const Format = "sklearn"

// Dir is the model's directory in the member's repository and Path the
// model file in it, the name the model server loads (model.joblib).
const (
	Dir  = "models/iris"
	Path = Dir + "/model.joblib"
)

// Samples are the data set's first sample of each class, in class order:
// the model predicts Classes for them.
func Samples() [][]float64 {
	return [][]float64{{5.1, 3.5, 1.4, 0.2}, {7.0, 3.2, 4.7, 1.4}, {6.3, 3.3, 6.0, 2.5}}
}

// Classes are the classes of Samples.
func Classes() []int { return []int{0, 1, 2} }
