"""Adapter to NVIDIA aiconfigurator-core (the ``[predict]`` extra), behind ``estimator.Estimator``.

Imported only by ``predict`` / ``advise``. Uses AIC's public surface: ``perf_database.get_database``, the model
registry (``models.get_model``), ``engine.build_ops_json`` and ``EngineHandle.evaluate_ops_json`` (the op-list
FFI). AIC's own op graph is read as op specs; corrections are ours (``corrections.py``).
"""
from __future__ import annotations

import json
import logging

from gpustack_k3.predict.estimator import PlannedOp, category, settings
from gpustack_k3.predict.types import INLINE_PREFIX, EngineConfig, EstimatorMissing, NoData, OpCost, PredictError
from gpustack_k3.core.model_config import arch_from_config


def _lookup(section: str, key: str, where: str, message: str):
    """An entry of data/aic.yaml, or NoData naming the field and the covered cases."""
    entry = settings()[section].get(key)
    if entry is None:
        raise NoData(where, message, f"predictions cover: {', '.join(settings()[section])}")
    return entry


def _sdk():
    try:
        from aiconfigurator_core.sdk import EngineHandle, common, config, perf_database
        from aiconfigurator_core.sdk.engine import build_ops_json
        from aiconfigurator_core.sdk.models import get_model
    except ImportError as exc:
        raise EstimatorMissing(str(exc)) from None
    return EngineHandle, common, config, perf_database, build_ops_json, get_model


def available() -> bool:
    try:
        _sdk()
    except EstimatorMissing:
        return False
    return True


def _quiet():
    # AIC logs every database load at INFO/WARNING; our output is the prediction.
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)


class AicEstimator:
    name = "aiconfigurator-core"

    def __init__(self) -> None:
        self._sdk = _sdk()
        _quiet()
        self._handles: dict[tuple[str, str], object] = {}
        self._paths: dict[str, str] = {}
        self._tmp = None            # copies of config.json files not named so (removed with the estimator)
        self.version = _dist_version()

    # ------------------------------------------------------------------ lookups
    def system(self, gpu: str) -> str:
        return _lookup("systems", gpu, "spec.hardware.gpuType", f"aiconfigurator-core has no tables for GPU {gpu!r}")

    def backend(self, engine: str) -> tuple[str, str]:
        b = _lookup("backends", engine, "spec.engine.name", f"no estimator backend for engine {engine!r}")
        return b["backend"], b["version"]

    def model_path(self, cfg: EngineConfig) -> str:
        """What AIC builds the op graph from: the catalog model's AIC id, or the model's own config.json (a local
        directory AIC reads, or the id of AIC's cached copy of that very file). Never a name AIC would download."""
        if cfg.model_config is None:
            return _lookup("models", cfg.model, "spec.model.name",
                           f"aiconfigurator-core has no op graph for model {cfg.model!r}; give its config.json "
                           "(--model-config FILE, or a local model directory as spec.model.path)")
        if cfg.model_config not in self._paths:
            self._paths[cfg.model_config] = self._config_dir(cfg.model_config)
        return self._paths[cfg.model_config]

    def _config_dir(self, path: str) -> str:
        from pathlib import Path

        common = self._sdk[1]
        if path.startswith(INLINE_PREFIX):           # a config the document carries (spec.model.configJSON)
            return self._write_config(path[len(INLINE_PREFIX):].encode())
        src = Path(path)
        if src.parent.resolve() == self.configs_dir().resolve() and src.name.endswith("_config.json"):
            hf_id = src.name[:-len("_config.json")].replace("--", "/", 1)
            if hf_id in common.DefaultHFModels:       # AIC's own cached config (with its hf_quant_config.json)
                return hf_id
        if src.name == "config.json":
            return str(src.parent)
        return self._write_config(src.read_bytes())      # AIC reads <dir>/config.json: a copy under that name

    def _write_config(self, data: bytes) -> str:
        """A directory of the estimator's own holding ``data`` as config.json (removed with the estimator)."""
        from pathlib import Path

        if self._tmp is None:
            import tempfile

            self._tmp = tempfile.TemporaryDirectory(prefix="gpustack-k3-aic-")
        d = Path(self._tmp.name) / str(len(self._paths))
        d.mkdir()
        (d / "config.json").write_bytes(data)
        return str(d)

    def configs_dir(self):
        """The directory of config.json files AIC ships (its model_configs/)."""
        from importlib import resources

        return resources.files("aiconfigurator_core").joinpath("model_configs")

    def catalog_arch(self, model: str):
        """A catalog model's architecture figures from the config.json AIC ships for it (core.model_config reads
        it), None when AIC has no config of it."""
        import json

        hf_id = settings()["models"].get(model)
        if hf_id is None:
            return None
        f = self.configs_dir().joinpath(f"{hf_id.replace('/', '--')}_config.json")
        return arch_from_config(json.loads(f.read_text()), f"aiconfigurator-core model_configs/{f.name}")

    def family(self, cfg: EngineConfig, arch) -> str:
        """AIC's model family of the model (its own architecture map), or NoData: "not modelled", naming it."""
        common = self._sdk[1]
        family = common.ARCHITECTURE_TO_MODEL_FAMILY.get(arch.architecture) if arch is not None else None
        if family is None:
            what = f"architecture {arch.architecture!r}" if arch is not None and arch.architecture else \
                "a config.json without architectures"
            kind = f" (model_type {arch.model_type!r})" if arch is not None and arch.model_type else ""
            raise NoData("spec.model", f"not modelled: aiconfigurator-core {self.version or ''} has no model family "
                         f"for {what}{kind} of {cfg.model!r}",
                         "modelled architectures: " + ", ".join(sorted(common.ARCHITECTURE_TO_MODEL_FAMILY)))
        return family

    def _database(self, gpu: str, table: str):
        _, _, _, perf_database, _, _ = self._sdk
        backend, version = self.backend(table)
        try:
            db = perf_database.get_database(self.system(gpu), backend, version)
        except Exception as exc:   # AIC raises its own types for missing data directories
            raise NoData("aiconfigurator-core", f"no {backend} {version} tables for {gpu}: {exc}",
                         "see `gpustack-k3 predict --help` for the covered cases") from None
        if db is None:
            raise NoData("aiconfigurator-core", f"no {backend} {version} tables for {gpu}",
                         "see `gpustack-k3 predict --help` for the covered cases")
        return db

    def _handle(self, gpu: str, table: str):
        key = (gpu, table)
        if key not in self._handles:
            EngineHandle = self._sdk[0]
            self._handles[key] = EngineHandle.for_database(self._database(gpu, table))
        return self._handles[key]

    # ------------------------------------------------------------------ Estimator
    def graph(self, cfg: EngineConfig, phase: str) -> list[dict]:
        _, common, config, _, build_ops_json, get_model = self._sdk
        if cfg.tp % cfg.ep:
            raise PredictError("spec.parallel.ep", f"EP {cfg.ep} does not divide TP {cfg.tp}", "use an EP dividing TP")
        mc = config.ModelConfig(tp_size=cfg.tp, pp_size=1, attention_dp_size=1, moe_tp_size=cfg.tp // cfg.ep,
                                moe_ep_size=cfg.ep, nextn=cfg.drafts,
                                kvcache_quant_mode=common.KVCacheQuantMode[cfg.kv_dtype])
        backend, _ = self.backend(cfg.engine)
        try:
            model = get_model(self.model_path(cfg), mc, backend)
        except (AssertionError, ValueError, NotImplementedError, KeyError, TypeError) as exc:
            raise NoData("aiconfigurator-core", f"cannot build the {cfg.model} op graph for {cfg.engine} TP{cfg.tp} "
                         f"EP{cfg.ep}: {exc}", "change the parallel layout") from None
        ops = model.generation_ops if phase == "generation" else model.context_ops
        return json.loads(build_ops_json(list(ops)))

    def price(self, cfg: EngineConfig, ops: list[PlannedOp]) -> list[OpCost]:
        # one evaluation per shape; AIC sums the ops of one answer that share a name (gpt-oss's sliding and full
        # attention layers are both "generation_attention"), so a name repeated goes to the next round
        groups: dict[tuple, list[int]] = {}
        for i, op in enumerate(ops):
            rnd = 0
            while any(ops[j].name == op.name for j in groups.get((op.table, op.phase, op.batch, op.s, op.prefix, rnd),
                                                                  [])):
                rnd += 1
            groups.setdefault((op.table, op.phase, op.batch, op.s, op.prefix, rnd), []).append(i)
        out: list[OpCost | None] = [None] * len(ops)
        for (table, phase, batch, s, prefix, _round), idx in groups.items():
            handle = self._handle(cfg.gpu, table)
            specs = json.dumps([ops[i].spec for i in idx])
            try:
                res = handle.evaluate_ops_json(specs, is_context=phase == "context", batch_size=max(1, batch),
                                               s=max(1, s), prefix=prefix)
            except Exception as exc:   # AIC's PerfDataNotAvailableError and friends: name the ops without rows
                missing = []
                for i in idx:
                    try:
                        handle.evaluate_ops_json(json.dumps([ops[i].spec]), is_context=phase == "context",
                                                 batch_size=max(1, batch), s=max(1, s), prefix=prefix)
                    except Exception:
                        missing.append(ops[i].name)
                raise NoData("aiconfigurator-core", f"no {table} table rows for {', '.join(missing or ['?'])} at "
                             f"batch {batch}, s {s}: {str(exc).splitlines()[0][:300]}",
                             "this case is outside the estimator's measured data") from None
            if len(res) != len(idx):
                raise PredictError("aiconfigurator-core", f"expected {len(idx)} op results, got {len(res)}",
                                   "report this: the op-list answer changed shape")
            for i, (_name, ms, _energy, source) in zip(idx, res):
                op = ops[i]
                out[i] = OpCost(op.name, category(op.spec), float(ms), str(source), batch, s, table,
                                list(op.corrections))
        return [o for o in out if o is not None]


def _dist_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("aiconfigurator-core")
    except Exception:
        return None
