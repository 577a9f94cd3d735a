#!/usr/bin/python3
"""train_iris: trains the iris classifier the tests' and the demo's member repository holds.

A TEST FIXTURE of the local cluster (deploy/images/README.md): scikit-learn's bundled iris data set
(150 samples, 4 features, classes 0, 1, 2), a logistic regression, saved with joblib to the file
its one argument names (model.joblib). Run in the sklearnserver image's Debian root file system so
the model loads with the same scikit-learn (`go run ./deploy/images --train-iris FILE`).
"""

import sys

import joblib
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression


def main():
    if len(sys.argv) != 2:
        print("usage: train_iris.py OUT.joblib", file=sys.stderr)
        sys.exit(2)
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X, y)
    joblib.dump(model, sys.argv[1])
    # The first sample of each class, as the tests send them.
    firsts = [X[list(y).index(c)].tolist() for c in (0, 1, 2)]
    print("trained on %d samples; first of each class %s predicted %s" % (len(X), firsts, model.predict(firsts).tolist()), file=sys.stderr)


if __name__ == "__main__":
    main()
