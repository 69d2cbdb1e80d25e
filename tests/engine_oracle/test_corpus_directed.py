"""tools/engine_oracle/corpus.py: lines aimed at raise sites (the names and constants of their guarding conditions)
and the exploring mutation over any option of the release's parser (unit tier: synthetic sources and options)."""
from __future__ import annotations

import ast
import random

from tools.engine_oracle import corpus
from tools.engine_oracle.reachability import _enclosing

SRC = '''\
class SpeculativeConfig:
    def __post_init__(self):
        if self.method == "mtp" and self.num_speculative_tokens > 4:
            raise ValueError("too many")
        if not self.enforce_eager:
            pass
        else:
            raise ValueError("eager")
        assert self.draft_tp in (1, 8), "tp"
'''


def _hints(line):
    tree = ast.parse(SRC)
    return corpus._guard_hints(_enclosing(tree, line), line)


def test_guard_hints_take_names_and_constants():
    assert _hints(4) == [("method", "mtp", False), ("num_speculative_tokens", 5, False)]
    # the else branch of `not x`: x is wanted true there
    assert _hints(8) == [("enforce_eager", None, False)]
    # an assert refuses when its test is false
    assert _hints(9) == [("draft_tp", 1, True)]


def test_flag_values_follow_the_option():
    rnd = random.Random(0)
    store_true = {"dest": "enforce_eager", "flags": ["--enforce-eager"], "action": "store_true", "nargs": 0}
    assert corpus._flag_value(store_true, rnd) == ("--enforce-eager", None)
    choice = {"dest": "kv_cache_dtype", "flags": ["--kv-cache-dtype"], "action": "store", "choices": ["auto", "fp8"]}
    assert corpus._flag_value(choice, rnd)[1] in ("auto", "fp8")
    integer = {"dest": "max_num_seqs", "flags": ["--max-num-seqs"], "action": "store", "type": "int"}
    assert corpus._flag_value(integer, rnd)[1] in corpus._INTS


def test_skipped_dests_are_files_hosts_models():
    for dest in ("model", "tokenizer", "download_dir", "port", "ssl_keyfile", "served_model_name", "speculative_draft_model_path"):
        assert corpus._FLAG_SKIP.search(dest), dest
    for dest in ("max_model_len", "tensor_parallel_size", "speculative_config", "enable_expert_parallel"):
        assert not corpus._FLAG_SKIP.search(dest), dest


def test_explore_zero_keeps_the_corpus():
    a = corpus.generate("vllm-0.33.0", 40, 3)
    assert a == corpus.generate("vllm-0.33.0", 40, 3, explore=0.0)
    b = corpus.generate("vllm-0.33.0", 40, 3, explore=1.0)
    assert any(k.startswith("flag:") for line in b for k in line["mutations"])
