"""Names vulture reports as unused that are used, each reviewed (issue 35 item 5). Parsed by vulture, never imported.

tests/architecture/test_tools.py runs vulture over the whole package (gpustack_k3/; tools/ and bench/ count as
users) with three sources of exceptions, each a mechanism that reads what vulture cannot see:
- decorators (IGNORE_DECORATORS in the test): @rule (the registry calls the check), click's @*.command/@*.group
  (click calls the command), pydantic's @field_validator/@model_validator (pydantic calls them);
- names derived from the code and the catalog, not typed (tools/vulture_derived.py: spec fields the engines'
  tables name, status fields, pass-through models, dataclasses serialized whole);
- this file: the rest, by hand, one group per reason. A new report fails the test: remove the code, or add the
  name here under the reason that reads it.
Vulture matches names, not owners: keep each group to the names its reason really reads."""
# ruff: noqa
_ = ...

# Python's hooks: a module-level __getattr__ serves the lazy re-exports (PEP 562; gpustack_k3/__init__.py,
# api/v1alpha1/__init__.py, core/argv/__init__.py, runtime/__init__.py)
_.__getattr__

# pydantic: the config of a pydantic dataclass (catalog/loader.py _dc), read by pydantic when it builds the class
_.__pydantic_config__

# PyYAML: Dumper.ignore_aliases, called by the emitter (the no-alias dumpers of cli/common.py, render/templates.py)
_.ignore_aliases

# click: Group/Command class attributes and methods click calls (cli/main.py: the lazy command group)
_.command_class, _.group_class, _.list_commands, _.get_command

# argparse: ArgumentParser._get_formatter, called by add_argument (core/argv/parser.py; documented there and in
# docs/architecture.md, "Start-up")
_._get_formatter

# tenacity: RetryCallState.attempt_number, read by the wait strategy (core/retry.py delay)
_.attempt_number

# http.server: BaseHTTPRequestHandler / ThreadingHTTPServer hooks (operator/health.py)
_.do_GET, _.log_message, _.daemon_threads

# kubernetes.client.Configuration attributes, read by the client (operator/kube.py)
_.retries, _.connection_pool_maxsize

# google-re2: re2.Options.log_errors, read by the library (coldstart/patterns.py)
_.log_errors

# read by name (getattr with a name from a table): probe/report.py _vals(ok, "ttft_content_s")
_.ttft_content_s

# catalog fields (catalog/loader.py) no code reads as an attribute, each kept for a reason:
# - HardwareProfile.estimated: the figure's provenance (a figure says how it was obtained), shown in the yaml;
# - HardwareProfile.host_ram_gib: read from the catalog dict by the engine oracle's host double
#   (tools/engine_oracle/doubles.py hw.get("host_ram_gib"));
# - ModelEntry.experts_per_token: compared by name with a config.json (core/resolve.py _COMPARED);
# - ModelEntry.draft_experts_per_token: the draft's published figure, kept next to draft_routed_experts;
# - EngineVersion.env_known: the record that a build reads a variable its envs.py lacks (docs/sources.md cites it);
# - AdviceRow.tpot_ms: a measured row of catalog/data/advice.yaml, validated whole.
_.estimated, _.host_ram_gib, _.experts_per_token, _.draft_experts_per_token, _.env_known, _.tpot_ms

# closed vocabularies the tests hold the code to (each a documented test seam, declared next to what it lists):
# - CONDITION_REASONS (api/v1alpha1/constants.py): every Ready reason the status table can set
#   (tests/operator/test_status_table.py, test_decide.py);
# - READ_BY_RULES (core/rules/envs.py): the variables the rules read, each release's catalog must declare their
#   parsers (tests/core/test_verdicts_fresh.py)
_.CONDITION_REASONS, _.READ_BY_RULES

# predict/scheduler.py: a simulated request's trace (when its prefill finished, how many decode steps it ran), the
# test seam through which tests/predict/test_scheduler.py checks the scheduling order (chunked prefill before
# decode, one step per output token)
_.prefill_done_at, _.decode_steps

# coldstart/patterns.py: LinePattern.search_re, the test seam that checks the re2 backend against Python's re
# on every catalog pattern (tests/coldstart/test_patterns.py)
_.search_re

# operator/kvcheck.py: the KVTransfer check (docs/design/010-pd-rollouts.md §4), tested by tests/operator/test_kvcheck.py
# but NOT YET CALLED by the reconciler (the wiring waits for the reconciler's seams): remove these when it is
_.KVTransferCheck, _.metric_samples, _.instance_urls, _.checked_at
