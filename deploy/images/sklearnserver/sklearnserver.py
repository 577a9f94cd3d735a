#!/usr/bin/python3
"""sklearnserver: a small scikit-learn model server of the local cluster's real node.

A TEST FIXTURE of the local cluster (deploy/images/README.md), not product code: it stands in for
KServe's own sklearn server, which Debian does not package. It speaks the KServe v1 protocol of
one model:

  GET  /v1/models/NAME          {"name": NAME, "ready": true}
  GET  /v1/models               {"models": [NAME]}
  POST /v1/models/NAME:predict  {"instances": [[...], ...]} -> {"predictions": [...]}

Arguments (the local cluster's ClusterServingRuntime metallo-sklearnserver gives the first, the
InferenceService's saved model arguments the rest; docs/site-runtime.md, "The private inference
argument rule"):

  --model_name=NAME --model_dir=DIR

DIR must lie under /workspace (the checked-out member workspace); the model is DIR/model.joblib,
loaded with joblib before the server listens. Loading a joblib file runs code from the file: it
is the member's own predictor, run as the member in the member's Pod. A model that cannot be
loaded (a missing file, a file that is not a model) ends the process with exit status 3, bad
arguments with 2, each also written to /dev/termination-log (the container's termination
message). Port: $PORT (8080). SIGTERM ends it with status 0.
"""

import json
import os
import signal
import sys
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXIT_USAGE = 2
EXIT_MODEL = 3
WORKSPACE = "/workspace"
MAX_BODY = 4 << 20


def fail(status, message):
    print("sklearnserver: " + message, file=sys.stderr, flush=True)
    try:  # the kubelet reports this file as the container's termination message
        with open("/dev/termination-log", "w") as f:
            f.write(message)
    except OSError:
        pass
    sys.exit(status)


def parse(argv):
    name, model_dir = None, None
    for arg in argv:
        if arg.startswith("--model_name="):
            name = arg[len("--model_name="):]
        elif arg.startswith("--model_dir="):
            model_dir = arg[len("--model_dir="):]
        else:
            fail(EXIT_USAGE, "unknown argument %r (usage: --model_name=NAME --model_dir=DIR)" % arg)
    if not name:
        fail(EXIT_USAGE, "no --model_name=NAME")
    if not model_dir:
        fail(EXIT_USAGE, "no --model_dir=DIR")
    real = os.path.realpath(model_dir)
    if real != WORKSPACE and not real.startswith(WORKSPACE + "/"):
        fail(EXIT_USAGE, "--model_dir=%s is not under %s" % (model_dir, WORKSPACE))
    return name, real


def load(model_dir):
    path = os.path.join(model_dir, "model.joblib")
    try:
        # joblib warns that it has no /dev/shm (a Pod's is small): it runs serially, as wanted here.
        warnings.filterwarnings("ignore", message=".*joblib will operate in serial mode")
        import joblib

        model = joblib.load(path)
    except Exception as e:  # any failure to load is the model's
        fail(EXIT_MODEL, "cannot load the model %s: %s: %s" % (path, type(e).__name__, e))
    if not hasattr(model, "predict"):
        fail(EXIT_MODEL, "%s holds a %s, which has no predict" % (path, type(model).__name__))
    return model


def handler(name, model):
    class Handler(BaseHTTPRequestHandler):
        def answer(self, status, body):
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def error(self, status, message):
            self.answer(status, {"error": message})

        def do_GET(self):
            if self.path == "/v1/models":
                self.answer(200, {"models": [name]})
            elif self.path == "/v1/models/" + name:
                self.answer(200, {"name": name, "ready": True})
            else:
                self.error(404, "no such path %s (this server serves model %s)" % (self.path, name))

        def do_POST(self):
            if self.path != "/v1/models/%s:predict" % name:
                self.error(404, "no such path %s (this server serves POST /v1/models/%s:predict)" % (self.path, name))
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self.error(400, "the body must have a Content-Length of at most %d bytes" % MAX_BODY)
                return
            try:
                body = json.loads(self.rfile.read(length))
                instances = body["instances"]
                if not isinstance(instances, list):
                    raise TypeError("instances is not an array")
            except Exception as e:
                self.error(400, "the body must be a JSON object with an array instances: %s" % e)
                return
            try:
                predictions = model.predict(instances).tolist()
            except Exception as e:
                self.error(400, "the model cannot predict these instances: %s: %s" % (type(e).__name__, e))
                return
            self.answer(200, {"predictions": predictions})

        def log_message(self, fmt, *args):
            print("sklearnserver: " + fmt % args, file=sys.stderr, flush=True)

    return Handler


def main():
    name, model_dir = parse(sys.argv[1:])
    model = load(model_dir)
    port = int(os.environ.get("PORT", "8080"))
    server = ThreadingHTTPServer(("", port), handler(name, model))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("sklearnserver: model %s (%s) from %s on port %d" % (name, type(model).__name__, model_dir, port), file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
