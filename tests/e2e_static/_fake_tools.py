"""A stand-in for kind, kubectl, helm and docker (one script, dispatched on $FAKE_TOOL) to run the control
flow of e2e/kind/run.sh where none of them exists. Every call is appended to $FAKE_LOG as a JSON line;
answers are what the real tools print for the calls run.sh makes. $FAKE_CR is the K3Deployment JSON
`kubectl get k3dep smollm2-cpu -o json` returns; $FAKE_STATE a directory for counters."""
import json
import os
import sys
from pathlib import Path

tool = os.environ["FAKE_TOOL"]
args = sys.argv[1:]
state = Path(os.environ["FAKE_STATE"])
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps([tool, *args]) + "\n")


def has(*words):
    return all(w in args for w in words)


if tool == "kind":
    if has("create", "cluster"):
        Path(args[args.index("--kubeconfig") + 1]).write_text("apiVersion: v1\nkind: Config\n")
        cfg = Path(args[args.index("--config") + 1]).read_text()
        assert 'config_path = "/etc/containerd/certs.d"' in cfg, cfg
    elif has("get", "nodes"):
        print(args[args.index("--name") + 1] + "-control-plane")
elif tool == "docker":
    if args[:1] == ["info"]:
        print(os.environ.get("FAKE_DOCKER_INFO", "16 68719476736"))
    elif args[:1] == ["create"]:
        print("cid0123")
    elif args[:1] == ["run"]:
        print("f" * 64)
    elif args[:1] == ["cp"]:
        sys.stdout.write("models/smollm2-hf/config.json\n")
    elif args[:2] == ["exec", "-i"]:
        sys.stdin.read()
elif tool == "helm":
    pass
elif tool == "kubectl":
    if args[:2] == ["get", "crd"]:
        print("True")
    elif args[:1] == ["apply"]:
        f = args[args.index("-f") + 1]
        if "/invalid-" in f:
            print('The K3Deployment "x" is invalid: spec.parallel.dcp: Invalid value: "object": '
                  "DCP>1 needs ... [rule vllm-dcp-with-dspark]", file=sys.stderr)
            sys.exit(1)
        if "k3-e2e-engine" in args:
            (state / "applied-engine.yaml").write_text(Path(f).read_text())
        else:
            n = state / "applied"
            n.write_text(str(int(n.read_text()) + 1 if n.exists() else 1))
    elif args[:2] == ["get", "k3dep"] and "-o" in args:
        out = args[args.index("-o") + 1]
        if out == "name":
            n = int((state / "applied").read_text())
            print("\n".join(f"k3deployment.k3.gpustack.ai/p{i}" for i in range(n)))
        elif out == "json":
            sys.stdout.write(Path(os.environ["FAKE_CR"]).read_text())
        elif out.startswith("jsonpath="):
            polls = state / "polls"
            k = int(polls.read_text()) + 1 if polls.exists() else 1
            polls.write_text(str(k))
            sys.stdout.write("Starting/weights_load" if k == 1 else "Ready/")
    elif args[:1] == ["exec"]:
        print(json.dumps({"choices": [{"index": 0, "text": " Paris."}]}))
