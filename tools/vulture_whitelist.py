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

# read by name (getattr with a name from a table): probe/report.py _vals(ok, "ttft_content_s"); the spec's UCX
# fields, core/launch.py UCX_ENV (field -> environment variable)
_.ttft_content_s, _.transports, _.netDevices

# gpustack_k3/oracle/engine_side/: runs inside an engine release's interpreter and stands in for parts of it; the
# release calls what follows, and vulture sees only our side:
# - the doubles of the release's Platform interface and of torch.cuda (doubles.py), the release's current platform
#   and subprocess registry probe (set on its modules), a kernel stub's signature (read by inspect), a socket
#   double's getsockname (worker.py)
_.get_device_capability, _.get_device_name, _.get_device_total_memory, _.is_fully_connected, _.get_device_numa_node
_.get_all_device_numa_nodes, _._run_in_subprocess, _.is_available, _.get_device_properties, _.mem_get_info
_.current_device, _.is_initialized, _._current_platform, _.getsockname, _.__signature__
# - the import stubs (stubs.py): importlib's loader and finder protocol, a stub module's __path__ and __version__,
#   and the protocol methods of the stub object that stands for any attribute of a stubbed package
_.create_module, _.locate_file, _.find_distributions, _.__path__
_.__getitem__, _.__setitem__, _.__delitem__, _.__contains__, _.__or__, _.__iter__, _.__len__, _.__bool__, _.__int__
_.__index__, _.__float__, _.__get_pydantic_core_schema__, _.__enter__, _.__exit__

# catalog fields (catalog/loader.py) no code reads as an attribute, each kept for a reason:
# - HardwareProfile.estimated: the figure's provenance (a figure says how it was obtained), shown in the yaml;
# - ModelEntry.experts_per_token: compared by name with a config.json (core/resolve.py _COMPARED);
# - ModelEntry.draft_experts_per_token: the draft's published figure, kept next to draft_routed_experts;
# - EngineVersion.env_known: the record that a build reads a variable its envs.py lacks (docs/sources.md cites it);
# - AdviceRow.tpot_ms: a measured row of catalog/data/advice.yaml, validated whole.
_.estimated, _.experts_per_token, _.draft_experts_per_token, _.env_known, _.tpot_ms

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
